"""wex inside SGLang: a custom weight loader that opens each scheduler's
rank of a wex job, binds the parameters of the model it serves, and syncs
them, driven by commands the trainer sends through
``update_weights_from_tensor``.

Launch SGLang with the loader allowed, then send each command to every
TP rank of the server (docs/python.md, "Inside the engines")::

    python -m sglang.launch_server --model-path MODEL --tp 2 \\
        --custom-weight-loader wex.integrations.sglang.load_weights

    from wex.integrations import sglang as wex_sglang
    def send(command):
        engine.begin_weight_update()
        engine.update_weights_from_tensor(
            command, load_format=wex_sglang.LOAD_FORMAT)
        engine.end_weight_update()
    send(wex_sglang.open_request(job, store.address, TOKEN))
    for step in ...:           # after each optimizer step of the trainer
        send(wex_sglang.sync_request(step))
    send(wex_sglang.close_request())

Read from SGLang 0.5.23:

- ``srt/model_executor/model_runner_components/weight_updater.py``
  (``WeightUpdater.update_weights_from_tensor``): a ``load_format`` listed
  in ``--custom-weight-loader`` is imported by its dotted path
  (``srt/utils/common.py``, ``dynamic_import``) and called as
  ``loader(model, named_tensors)``, each tensor moved to the rank's device
  first; what it returns is dropped, and the answer to the caller is
  SGLang's own success and message.
- ``srt/entrypoints/engine.py``: ``update_weights_from_tensor`` serializes
  the same tensors for every TP rank, so a command carries only what all
  ranks of a server share (``dp_rank`` included: one server is one
  replica); ``srt/managers/scheduler_components/weight_updater.py``: it
  runs between ``begin_weight_update()`` and ``end_weight_update()``, each
  TP rank's scheduler calling the loader, then meeting the others at a
  barrier. Nothing there catches what a loader raises, so a loader that
  raises takes the scheduler down.
- ``srt/distributed/parallel_state.py``: the TP rank and size
  (``get_tensor_model_parallel_rank``,
  ``get_tensor_model_parallel_world_size``) and the pipeline rank and size
  (``get_pp_group().rank_in_group``, ``.world_size``);
  ``srt/runtime_context.py``: ``get_parallel()``'s ``dp_rank`` (None
  without a data-parallel controller), ``dp_size`` (replicas) and
  ``attn_dp_size`` (DP attention inside one server, wex's
  ``parallel.attn_dp``).

So the loader raises on a command it cannot carry out at open or close (a
job config that does not fit the server, a model lacking a tensor: loud,
at start), but keeps a failed step to itself: the step's failure reaches
the trainer through its own ``sync``, this rank's tensors hold the last
committed step or are marked dirty (``wex_state``), and the server goes
on serving.
"""
from __future__ import annotations

import importlib
import json
import logging
import os
import weakref
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .._errors import WexError, invalid
from . import _serving

if TYPE_CHECKING:
    import torch

    from .._job import Config, Job

ENGINE = "SGLang"
# What --custom-weight-loader names, and update_weights_from_tensor's
# load_format.
LOAD_FORMAT = "wex.integrations.sglang.load_weights"
_SIZES = _serving.COORDINATES + ("attn_dp",)
_PREFIX = "wex."
_COMMANDS = ("open", "sync", "close")

_log = logging.getLogger(__name__)


class _Rank:
    """What one model's scheduler holds of its job."""

    def __init__(self, job: Job) -> None:
        self.job = job
        self.report: dict[str, Any] | None = None
        self.error: str | None = None


# model -> its rank of the job; a model that goes away takes its entry.
_ranks: weakref.WeakKeyDictionary[Any, _Rank] = weakref.WeakKeyDictionary()


# ---- the trainer's side: commands ------------------------------------------

def open_request(config: Config, rendezvous: str | None = None,
                 token: str | None = None, *, job_id: str | None = None,
                 dp_rank: int | None = None,
                 strict: bool = True) -> list[tuple[str, torch.Tensor]]:
    """The command that makes every rank of a server ``wex_open`` its rank
    of the job, for ``update_weights_from_tensor``. A path in `config` is
    read on the server's host (relative to its working directory, as are
    paths inside a dict); `dp_rank` says which replica of the job this
    server is when it is not SGLang's data-parallel controller's."""
    if isinstance(config, Mapping):
        text = json.dumps(config)
    elif isinstance(config, (str, os.PathLike)):
        text = os.fspath(config)
    else:
        raise TypeError("open_request: config must be a path, JSON text or "
                        "a dict, not %s" % type(config).__name__)
    return _command("open", {"config": text, "rendezvous": rendezvous,
                             "token": token, "job_id": job_id,
                             "dp_rank": dp_rank, "strict": strict})


def sync_request(step: int | None = None) -> list[tuple[str, torch.Tensor]]:
    """The command that makes every rank of a server ``wex_sync(step)``."""
    return _command("sync", {"step": step})


def close_request() -> list[tuple[str, torch.Tensor]]:
    """The command that makes every rank of a server ``wex_close()``."""
    return _command("close", {})


def _command(name: str,
             args: dict[str, Any]) -> list[tuple[str, torch.Tensor]]:
    """One named uint8 tensor holding the command's arguments as JSON: what
    update_weights_from_tensor carries to every TP rank."""
    import torch

    data = bytearray(json.dumps(args).encode("utf-8"))
    return [(_PREFIX + name, torch.frombuffer(data, dtype=torch.uint8))]


# ---- the server's side ----------------------------------------------------

def load_weights(model: Any, named_tensors: Sequence[tuple[str, Any]]) -> None:
    """SGLang's custom weight loader (``--custom-weight-loader
    wex.integrations.sglang.load_weights``): carries out the one wex
    command in `named_tensors` on this rank's `model`."""
    call = "load_weights"
    names = [n for n, _ in named_tensors]
    if len(names) != 1 or not names[0].startswith(_PREFIX) or \
            names[0][len(_PREFIX):] not in _COMMANDS:
        raise invalid("%s: expected one wex command (%s), got %s: this "
                      "loader carries wex's commands, not weights"
                      % (call, ", ".join(_PREFIX + c for c in _COMMANDS),
                         names[:4] + (["..."] if len(names) > 4 else [])))
    name, tensor = named_tensors[0]
    try:
        args = json.loads(bytes(tensor.detach().cpu().flatten().tolist()))
    except (AttributeError, TypeError, ValueError) as e:
        args = e
    command = name[len(_PREFIX):]
    if not isinstance(args, dict):
        raise invalid("%s: %s: expected the uint8 JSON tensor %s_request() "
                      "makes (%s)" % (call, name, command, args))
    if command == "open":
        opened = wex_open(model, args.pop("config"), **args)
        _log.info("wex: opened rank %d (tp %d, pp %d, dp %d), %d tensors",
                  opened["rank"], opened["tp"], opened["pp"], opened["dp"],
                  opened["tensors"])
    elif command == "sync":
        rank = _live(model, "wex_sync")
        try:
            report = wex_sync(model, args["step"])
        except WexError as e:
            rank.error = str(e)
            _log.error("wex: step %s failed on rank %d: %s", args["step"],
                       rank.job.rank, e)
            return
        _log.info("wex: rank %d committed step %d (%d bytes, %.3f s)",
                  report["rank"], report["committed_step"], report["bytes"],
                  report["seconds"])
    else:
        wex_close(model)


def wex_open(model: Any, config: Config, rendezvous: str | None = None,
             token: str | None = None, *, job_id: str | None = None,
             tp_rank: int | None = None, pp_rank: int | None = None,
             dp_rank: int | None = None, tp_size: int | None = None,
             pp_size: int | None = None, dp_size: int | None = None,
             attn_dp_size: int | None = None,
             strict: bool = True) -> dict[str, Any]:
    """Opens the rank of the job's destination (its ``"engine"`` must be
    ``"sglang"``) that holds this scheduler's `model`, and binds its
    parameters. The rank is the global rank of the (tp, pp, dp)
    coordinates as wex's sglang engine numbers them (dp outermost, then
    pp, then tp); each coordinate and size given is taken as is and, unless
    all three coordinates are given, the others are read from SGLang, whose
    sizes must be the job's ``/destination/parallel`` (tp, pp, attn_dp; dp
    may also be 1: a server that is one replica). Returns {"rank", "tp",
    "pp", "dp", "tensors", "bytes"}."""
    call = "wex_open"
    if model in _ranks:
        raise invalid("wex_open: this model has a wex job open already: "
                      "close it first")
    dest = _serving.read_destination(call, config, "sglang", _SIZES)
    at = _serving.place(call, ENGINE, dest, {
        "tp_rank": tp_rank, "pp_rank": pp_rank, "dp_rank": dp_rank,
        "tp_size": tp_size, "pp_size": pp_size, "dp_size": dp_size,
        "attn_dp_size": attn_dp_size}, _coordinates)
    tensors = _serving.parameters(model, call)
    job = _serving.open_rank(call, config, at, tensors,
                             rendezvous=rendezvous, token=token,
                             job_id=job_id, strict=strict)
    _ranks[model] = _Rank(job)
    return {"rank": at.rank, "tp": at.tp, "pp": at.pp, "dp": at.dp,
            "tensors": len(job.tensors),
            "bytes": sum(t.nbytes for t in job.tensors)}


def wex_sync(model: Any, step: int | None = None) -> dict[str, Any]:
    """One step on this model's rank: returns its wex.SyncReport as a
    plain dict, with its "rank"; a failed step raises wex.WexError.
    Without a step, the rank joins the job (``Job.join``)."""
    rank = _live(model, "wex_sync")
    rank.error = None
    report = _serving.report_dict(rank.job, rank.job.sync(step))
    rank.report = report
    return report


def wex_close(model: Any) -> None:
    """Leaves the job; the parameters keep the last committed step. Does
    nothing when no job is open."""
    rank = _ranks.pop(model, None)
    if rank is not None:
        rank.job.close()


def wex_state(model: Any) -> dict[str, Any] | None:
    """Where this model's rank stands, for the server's own checks: its
    "rank", "committed_step", "dirty" (a failed step may have left its
    tensors holding a mix of two steps: stop serving until the next
    commit), the last step's "report" and the last failed step's "error"
    (None since a step succeeded). None when no job is open."""
    rank = _ranks.get(model)
    if rank is None:
        return None
    return {"rank": rank.job.rank, "committed_step": rank.job.committed_step,
            "dirty": rank.job.dirty, "report": rank.report,
            "error": rank.error}


def _live(model: Any, call: str) -> _Rank:
    rank = _ranks.get(model)
    if rank is None:
        raise invalid("%s: no wex job is open for this model: send "
                      "open_request() first" % call)
    return rank


def _coordinates() -> dict[str, int]:
    """This scheduler's coordinates and sizes, as SGLang 0.5.23 has them."""
    dist = importlib.import_module("sglang.srt.distributed")
    parallel = importlib.import_module(
        "sglang.srt.runtime_context").get_parallel()
    pp = dist.get_pp_group()
    try:
        dp_rank = parallel.dp_rank
    except (AttributeError, RuntimeError):  # never published: no controller
        dp_rank = None
    return {"tp_rank": int(dist.get_tensor_model_parallel_rank()),
            "tp_size": int(dist.get_tensor_model_parallel_world_size()),
            "pp_rank": int(pp.rank_in_group), "pp_size": int(pp.world_size),
            "dp_rank": 0 if dp_rank is None else int(dp_rank),
            "dp_size": int(parallel.dp_size),
            "attn_dp_size": int(parallel.attn_dp_size)}
