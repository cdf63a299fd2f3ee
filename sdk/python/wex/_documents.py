"""wex.layout and wex.plan: the documents `wex layout --json` and
`wex plan --json` print (schemas/layout.schema.json, plan.schema.json)."""
import ctypes
import json
import os

from . import _lib
from ._errors import check, invalid
from ._job import _SIDES, _config_text


def _take(pointer):
    try:
        return json.loads(ctypes.string_at(pointer.value).decode("utf-8"))
    finally:
        _lib.lib().wex_free(pointer)


def layout(model, engine, parallel=None, options=None, rank=None):
    """How `engine` lays out the model of config.json path `model` with the
    parallel config `parallel` (a dict: {"tp": 2, "pp": 2}) and engine
    `options`: every rank, or only `rank`. A dict with "model" (its
    canonical tensors), "engine", "parallel", "ranks" and "layout" (per rank:
    coordinates, local tensors and the pieces of canonical tensors each
    holds)."""
    out = ctypes.c_void_p()
    check(_lib.lib().wex_layout_json(
        os.fspath(model).encode("utf-8"), engine.encode("utf-8"),
        json.dumps(parallel or {}).encode("utf-8"),
        None if options is None else json.dumps(options).encode("utf-8"),
        -1 if rank is None else int(rank), ctypes.byref(out)))
    return _take(out)


def plan(config, rank=None, side="destination"):
    """What the plan of job `config` (a path, JSON text or a dict) adds up
    to: operations, bytes moved and needed, redundancy, the busiest ranks,
    the predicted step time and its lower bound; or, with `rank`, that
    rank's (of `side`) own operations and bytes. The job's transport need
    not be installed."""
    if side not in _SIDES:
        raise invalid("wex.plan: side must be 'source' or 'destination', "
                      "not %r" % (side,))
    out = ctypes.c_void_p()
    check(_lib.lib().wex_plan_json(_config_text(config).encode("utf-8"),
                                   _SIDES[side],
                                   -1 if rank is None else int(rank),
                                   ctypes.byref(out)))
    return _take(out)
