"""wex.layout and wex.plan: the documents `wex layout --json` and
`wex plan --json` print (schemas/layout.schema.json, plan.schema.json)."""
from __future__ import annotations

import ctypes
import json
import os
from typing import TYPE_CHECKING, Any

from . import _lib
from ._errors import check, invalid
from ._job import _SIDES, _config_text

if TYPE_CHECKING:
    from ._job import Config


def _take(pointer: ctypes.c_void_p) -> dict[str, Any]:
    try:
        # A JSON document: its values are whatever the schema says.
        doc: dict[str, Any] = json.loads(
            ctypes.string_at(pointer).decode("utf-8"))
        return doc
    finally:
        _lib.lib().wex_free(pointer)


def layout(model: str | os.PathLike[str], engine: str,
           parallel: dict[str, Any] | None = None,
           options: dict[str, Any] | None = None,
           rank: int | None = None) -> dict[str, Any]:
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


def plan(config: Config, rank: int | None = None,
         side: str = "destination") -> dict[str, Any]:
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
