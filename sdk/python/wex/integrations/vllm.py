"""wex inside vLLM: a worker extension that opens the worker's rank of a
wex job, binds the parameters of the model it serves, and syncs them.

Launch vLLM with it, then reach every worker from the trainer's side
through ``collective_rpc`` (docs/python.md, "Inside the engines")::

    vllm serve MODEL --tensor-parallel-size 2 \\
        --worker-extension-cls wex.integrations.vllm.WexWorkerExtension

    llm.collective_rpc("wex_open", args=(job, store.address, TOKEN))
    for step in ...:           # after each optimizer step of the trainer
        reports = llm.collective_rpc("wex_sync", args=(step,))
    llm.collective_rpc("wex_close")

Read from vLLM 0.34.0:

- ``vllm/v1/worker/worker_base.py`` (``WorkerWrapperBase.init_worker``):
  ``--worker-extension-cls`` names a class vLLM appends to its Worker's
  bases, refusing one with an attribute the Worker already has, so the
  class has only ``wex_`` methods and the ``destroy_worker_extension``
  hook, which vLLM calls with the worker at shutdown;
  ``collective_rpc(method, args=...)`` calls the method on every worker
  (``v1/serial_utils.py``, ``run_method``) and returns each worker's
  answer, which must pickle: ``wex_sync`` answers a plain dict. An
  exception goes back to the caller as the worker's failure.
- ``vllm/distributed/parallel_state.py``: the worker's tensor-parallel
  rank and size (``get_tensor_model_parallel_rank``,
  ``get_tensor_model_parallel_world_size``) and pipeline rank and size
  (``get_pp_group().rank_in_group``, ``.world_size``).
- ``vllm/config/parallel.py``, ``vllm/v1/engine/core.py``: the
  data-parallel rank is ``parallel_config.data_parallel_index``; a dense
  model's DP ranks run as independent servers (``data_parallel_size``
  set back to 1, the index kept), a MoE model's keep
  ``data_parallel_size``. A server started on its own (no
  ``--data-parallel-size``) is DP rank 0: pass ``dp_rank`` to say which
  replica of the job it is.
- ``vllm/v1/worker/gpu_worker.py``, ``gpu/model_runner.py``: the model is
  ``self.model_runner.model``, its parameters allocated once at load and
  updated in place (what wex's bind needs); its ``load_weights`` names
  them ``dict(self.named_parameters())``, as ``wex_open`` binds them.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .._errors import invalid
from . import _serving

if TYPE_CHECKING:
    from .._job import Config, Job

ENGINE = "vllm"


class WexWorkerExtension:
    """Mixed into vLLM's Worker (``--worker-extension-cls
    wex.integrations.vllm.WexWorkerExtension``): ``wex_open``,
    ``wex_sync`` and ``wex_close``, called on every worker through
    ``collective_rpc``. Also usable on any object holding
    ``model_runner.model`` (a worker wrapped differently), with its
    coordinates given explicitly."""

    # What the Worker this is mixed into has (vLLM's, or one shaped like
    # it); annotations only, so that they add no attribute to the class.
    model_runner: Any
    _wex_job: Job | None

    def wex_open(self, config: Config, rendezvous: str | None = None,
                 token: str | None = None, *, job_id: str | None = None,
                 tp_rank: int | None = None, pp_rank: int | None = None,
                 dp_rank: int | None = None, tp_size: int | None = None,
                 pp_size: int | None = None, dp_size: int | None = None,
                 strict: bool = True) -> dict[str, Any]:
        """Opens this worker's rank of the job's destination (its
        ``"engine"`` must be ``"vllm"``) and binds the parameters of
        ``self.model_runner.model``.

        The rank is the global rank of the worker's (tp, pp, dp)
        coordinates as wex's vllm engine numbers them (dp outermost, then
        pp, then tp). Each coordinate and size given here is taken as is;
        unless all three coordinates are given, the others are read from
        vLLM. vLLM's sizes must be the job's ``/destination/parallel`` (a
        data-parallel size may also be 1: a server that is one replica).
        ``strict=False`` lets the model hold parameters the job does not
        have. Returns {"rank", "tp", "pp", "dp", "tensors", "bytes"}."""
        call = "wex_open"
        if getattr(self, "_wex_job", None) is not None:
            raise invalid("wex_open: this worker has a wex job open "
                          "already: wex_close() it first")
        dest = _serving.read_destination(call, config, ENGINE,
                                         _serving.COORDINATES)
        at = _serving.place(call, "vLLM", dest, {
            "tp_rank": tp_rank, "pp_rank": pp_rank, "dp_rank": dp_rank,
            "tp_size": tp_size, "pp_size": pp_size, "dp_size": dp_size},
            lambda: _coordinates(self))
        model = getattr(getattr(self, "model_runner", None), "model", None)
        if model is None:
            raise invalid("wex_open: this worker has no model_runner.model "
                          "(is the model loaded?)")
        tensors = _serving.parameters(model, call)
        job = _serving.open_rank(call, config, at, tensors,
                                 rendezvous=rendezvous, token=token,
                                 job_id=job_id, strict=strict)
        self._wex_job = job
        return {"rank": at.rank, "tp": at.tp, "pp": at.pp, "dp": at.dp,
                "tensors": len(job.tensors),
                "bytes": sum(t.nbytes for t in job.tensors)}

    def wex_sync(self, step: int | None = None) -> dict[str, Any]:
        """One step on this worker: returns its wex.SyncReport as a plain
        dict, with its "rank". Without a step, the worker joins the job
        (``Job.join``); a failed step raises wex.WexError."""
        job = _live(self)
        return _serving.report_dict(job, job.sync(step))

    def wex_close(self) -> None:
        """Leaves the job; the parameters keep the last committed step.
        Does nothing when no job is open."""
        job = getattr(self, "_wex_job", None)
        self._wex_job = None
        if job is not None:
            job.close()

    def destroy_worker_extension(self) -> None:
        """vLLM's hook before the worker shuts down: leaves the job."""
        self.wex_close()


def _live(worker: Any) -> Job:
    job: Job | None = getattr(worker, "_wex_job", None)
    if job is None:
        raise invalid("wex_sync: no wex job is open on this worker: call "
                      "wex_open first")
    return job


def _coordinates(worker: Any) -> dict[str, int]:
    """The worker's coordinates and sizes, as vLLM 0.34.0 has them."""
    state = importlib.import_module("vllm.distributed.parallel_state")
    pp = state.get_pp_group()
    parallel = getattr(worker, "parallel_config", None)
    if parallel is None:
        parallel = worker.vllm_config.parallel_config
    dp_rank = getattr(parallel, "data_parallel_index", None)
    if dp_rank is None:
        dp_rank = parallel.data_parallel_rank
    return {"tp_rank": int(state.get_tensor_model_parallel_rank()),
            "tp_size": int(state.get_tensor_model_parallel_world_size()),
            "pp_rank": int(pp.rank_in_group), "pp_size": int(pp.world_size),
            "dp_rank": int(dp_rank),
            "dp_size": int(parallel.data_parallel_size)}
