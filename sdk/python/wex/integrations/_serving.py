"""What the vLLM and SGLang integrations share: the destination's sizes
read from the job config, a worker's place in them (its coordinates, from
the engine or given), the rank wex's serving engines number it by, and
opening and binding that rank."""
from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from .._errors import WexError, invalid
from .._job import Job, SyncReport

if TYPE_CHECKING:
    import torch

    from .._job import Config

# The coordinates of a serving rank, innermost first: wex's vllm and
# sglang engines number ranks dp outermost, then pp, then tp
# (plugins/engines/vllm/vllm.c, plugins/engines/sglang/sglang.c).
COORDINATES = ("tp", "pp", "dp")

_NAMES = {"tp": "tensor-parallel", "pp": "pipeline-parallel",
          "dp": "data-parallel", "attn_dp": "attention data-parallel"}


class Placement(NamedTuple):
    """A worker's destination rank and the coordinates it came from."""
    rank: int
    tp: int
    pp: int
    dp: int

    def describe(self) -> str:
        return "rank %d (tp %d, pp %d, dp %d)" % self


class Destination(NamedTuple):
    """The job config's destination: its sizes and where they were read."""
    sizes: dict[str, int]
    where: str


def read_destination(call: str, config: Config, engine: str,
                     keys: tuple[str, ...]) -> Destination:
    """The job config's /destination/parallel sizes named by `keys` (1
    where absent); refuses a destination engine other than `engine`.
    Whatever else is wrong with the config is libwex's to say at open."""
    doc, where = _read_config(call, config)
    dest = doc.get("destination")
    got = dest.get("engine") if isinstance(dest, Mapping) else None
    if got != engine:
        raise invalid("%s: job config %s: /destination/engine is %s; "
                      "expected \"%s\", the layout this engine's model "
                      "holds" % (call, where, json.dumps(got), engine))
    assert isinstance(dest, Mapping)
    parallel = dest.get("parallel", {})
    if not isinstance(parallel, Mapping):
        raise invalid("%s: job config %s: /destination/parallel: expected "
                      "an object, got %s"
                      % (call, where, json.dumps(parallel)))
    sizes: dict[str, int] = {}
    for key in keys:
        value = parallel.get(key, 1)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise invalid("%s: job config %s: /destination/parallel/%s: "
                          "expected a positive integer, got %s"
                          % (call, where, key, json.dumps(value)))
        sizes[key] = value
    return Destination(sizes, where)


def _read_config(call: str, config: Config) -> tuple[Mapping[str, Any], str]:
    """The job config's document, and how to name it in a message. A str
    is JSON text when it starts with "{", as libwex reads it, else a
    path."""
    if isinstance(config, Mapping):
        return config, "<job dict>"
    if not isinstance(config, (str, os.PathLike)):
        raise TypeError("%s: config must be a path, JSON text or a dict, "
                        "not %s" % (call, type(config).__name__))
    text = os.fspath(config)
    if isinstance(config, str) and text.lstrip().startswith("{"):
        where = "<job text>"
    else:
        where = text
        try:
            with open(text, encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            raise invalid("%s: job config %s: %s" % (call, where,
                                                     e.strerror or e))
    try:
        doc = json.loads(text)
    except ValueError as e:
        raise invalid("%s: job config %s: not JSON (%s)" % (call, where, e))
    if not isinstance(doc, Mapping):
        raise invalid("%s: job config %s: expected a JSON object" % (call,
                                                                     where))
    return doc, where


def _count(call: str, key: str, value: object, least: int) -> int | None:
    """An explicit rank (least 0) or size (least 1), checked; None when
    not given."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise invalid("%s: %s must be %s integer, not %r"
                      % (call, key, "a non-negative" if least == 0
                         else "a positive", value))
    return value


def place(call: str, engine: str, dest: Destination,
          given: Mapping[str, object],
          read_engine: Callable[[], Mapping[str, int]]) -> Placement:
    """This worker's destination rank. `given` holds the coordinates
    (``tp_rank``, ``pp_rank``, ``dp_rank``) and engine sizes (``tp_size``,
    ``pp_size``, ``dp_size``, and any other size the destination has,
    such as ``attn_dp_size``) passed explicitly, None where not;
    `read_engine()` reads what is missing from the engine (importing it).
    The engine's sizes must be the job's: a data-parallel size may also be
    1, a server that is one replica of the job's dp."""
    values = {k: _count(call, k, v, 0 if k.endswith("_rank") else 1)
              for k, v in given.items()}
    origin = {k: "given" for k, v in values.items() if v is not None}
    missing = ["%s_rank" % c for c in COORDINATES
               if values.get("%s_rank" % c) is None]
    if missing:
        for key, value in _read_engine(call, engine, dest, missing,
                                       read_engine).items():
            if values.get(key) is None:
                values[key] = value
                origin[key] = "from %s" % engine
    for key, want in dest.sizes.items():
        got = values.get("%s_size" % key)
        if got is None or got == want or (key == "dp" and got == 1):
            continue
        raise invalid("%s: %s's %s size is %d (%s) but the job's "
                      "/destination/parallel/%s is %d (%s)%s"
                      % (call, engine, _NAMES.get(key, key), got,
                         origin["%s_size" % key], key, want, dest.where,
                         ": expected %d, or 1 for a server that is one "
                         "replica" % want if key == "dp" else ""))
    at = {}
    for c in COORDINATES:
        rank, size = values["%s_rank" % c], dest.sizes[c]
        assert rank is not None
        if rank >= size:
            raise invalid("%s: %s_rank %d (%s) is not a rank of the job's "
                          "/destination/parallel/%s = %d (%s): expected "
                          "0..%d" % (call, c, rank, origin["%s_rank" % c],
                                     c, size, dest.where, size - 1))
        at[c] = rank
    tp, pp = dest.sizes["tp"], dest.sizes["pp"]
    return Placement((at["dp"] * pp + at["pp"]) * tp + at["tp"], at["tp"],
                     at["pp"], at["dp"])


def _read_engine(call: str, engine: str, dest: Destination,
                 missing: list[str],
                 read_engine: Callable[[], Mapping[str, int]]
                 ) -> Mapping[str, int]:
    """The engine's coordinates and sizes; without the engine, 0 for a
    missing coordinate whose size is 1 (there is no other)."""
    try:
        return read_engine()
    except ImportError as e:
        needed = [k for k in missing if dest.sizes[k[:-len("_rank")]] > 1]
        if not needed:
            return {k: 0 for k in missing}
        raise invalid("%s: %s is not importable here (%s): pass %s "
                      "explicitly" % (call, engine, e, ", ".join(needed)))
    except WexError:
        raise
    except Exception as e:
        raise invalid("%s: could not read this worker's coordinates from "
                      "%s (%s: %s): pass %s explicitly"
                      % (call, engine, type(e).__name__,
                         str(e).splitlines()[0] if str(e) else "",
                         ", ".join(missing)))


def open_rank(call: str, config: Config, at: Placement,
              tensors: Mapping[str, torch.Tensor], *,
              rendezvous: str | None, token: str | None,
              job_id: str | None, strict: bool) -> Job:
    """Opens destination rank `at` and binds `tensors` to it; a refusal
    names the call and the rank's coordinates."""
    try:
        job = Job(config, "destination", at.rank, rendezvous=rendezvous,
                  token=token, job_id=job_id)
    except WexError as e:
        raise _in(call, at, e) from None
    try:
        job.bind(tensors, strict=strict)
    except WexError as e:
        job.close()
        raise _in(call, at, e) from None
    except BaseException:
        job.close()
        raise
    return job


def _in(call: str, at: Placement, e: WexError) -> WexError:
    return WexError(e.code, "%s: %s: %s" % (call, at.describe(), e.message),
                    e.missed)


def parameters(model: Any, call: str) -> dict[str, torch.Tensor]:
    """The model's parameters by name, as the engines' own load_weights
    see them (``dict(self.named_parameters())``: a tied weight once)."""
    named = getattr(model, "named_parameters", None)
    if named is None:
        raise invalid("%s: expected a torch.nn.Module, got %s"
                      % (call, type(model).__name__))
    return dict(named())


def report_dict(job: Job, report: SyncReport) -> dict[str, Any]:
    """A SyncReport as a plain dict (an RPC answer must pickle without
    wex), with the rank that made it."""
    out = dict(report._asdict())
    out["rank"] = job.rank
    return out
