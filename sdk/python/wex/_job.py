"""wex.Job: one rank of a weight-sync job, over the engine API of
<wex/wex.h>."""
from __future__ import annotations

import ctypes
import json
import os
import threading
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple, cast

from . import _adopt, _dtypes, _lib, _modules
from ._closing import Closing
from ._errors import WexError, check, invalid

if TYPE_CHECKING:
    import torch

    # A job config: its file's path, its JSON text, or the document itself.
    Config = str | os.PathLike[str] | Mapping[str, Any]
    # What bind takes: named tensors, or a module whose state dict names them.
    Tensors = (Mapping[str, torch.Tensor] | Iterable[tuple[str, torch.Tensor]]
               | torch.nn.Module)
    # One local tensor as libwex describes it: name, wex dtype, shape, bytes.
    _Spec = tuple[str, str, tuple[int, ...], int]
    # What tensors sharing memory have in common: device type, index, address.
    _StorageKey = tuple[str, int | None, int]


class TensorSpec(NamedTuple):
    """One local tensor of this rank, as its engine holds it:
    its name (the engine's own, a state-dict name), dtype (a torch.dtype, or the
    wex name such as "BF16" when torch is not installed), shape and size."""
    name: str
    dtype: torch.dtype | str
    shape: tuple[int, ...]
    nbytes: int


class SyncReport(NamedTuple):
    """What one wex_sync did on this rank: the step, the
    step this destination has committed since, its operations and bytes sent or
    received, its peers, the seconds from the step's barrier to commit, whether
    digests were checked and matched, how many tries the step took, how many
    dead sources it went without, (sources) the transport puts it issued;
    and with delta steps, the bytes that crossed the wire, the elements sent
    as deltas and how many of them changed, the mode ("full", "delta" or
    "mixed") and (destinations) the seconds the commit spent applying
    deltas; and with elastic destination replicas, the replicas that took
    part in the step, committed it, joined (took part, and had not in this
    rank's previous step) and left (the reverse)."""
    step: int
    committed_step: int
    operations: int
    bytes: int
    peers: int
    seconds: float
    verified: bool
    attempts: int
    failed_over: int
    puts: int
    wire_bytes: int = 0
    delta_elements: int = 0
    changed_elements: int = 0
    mode: str = "full"
    apply_seconds: float = 0.0
    replicas: int = 0
    replicas_committed: int = 0
    replicas_joined: int = 0
    replicas_left: int = 0
    replicas_seeded: int = 0
    seeded_bytes: int = 0

    @property
    def changed_fraction(self) -> float:
        """The fraction of the elements sent as deltas that changed (0.0
        when none went as deltas)."""
        return (self.changed_elements / self.delta_elements
                if self.delta_elements else 0.0)


_SIDES = {"source": _lib.SIDE_SOURCE, "destination": _lib.SIDE_DESTINATION}


def _config_text(config: Config) -> str:
    """A job config as libwex takes it: a path, or the JSON text itself."""
    if isinstance(config, Mapping):
        return json.dumps(config)
    if isinstance(config, os.PathLike):
        return os.fspath(config)
    if isinstance(config, str):
        return config
    raise TypeError("wex.Job: config must be a path, JSON text or a dict, "
                    "not %s" % type(config).__name__)


def _encode(text: object) -> bytes | None:
    return None if text is None else str(text).encode("utf-8")


class Job(Closing):
    """One rank of a job: ``wex.Job(config, "source"|"destination", rank)``.

    ``config`` is a job file's path, its JSON text or a dict (paths inside a
    text or a dict are relative to the working directory). ``rendezvous``
    ("HOST:PORT"), ``token`` and ``job_id`` override the config's (and
    $WEX_RENDEZVOUS, $WEX_TOKEN). Opening lays out both sides and plans this
    rank's operations; then ``bind`` (or ``allocate``) its tensors and call
    ``sync(step)`` every step, on every rank of both sides.

    ``checkpoint``, a Hugging Face checkpoint directory, makes a source rank
    read it: its tensors are bound to the checkpoint's files, mapped
    read-only (the job's source engine must be hf holding the checkpoint's
    dtypes), and a mismatch with the model is a WexError naming the file,
    the tensor, what was expected and what was found.

    A Job may be shared between threads: every call into libwex (``sync``,
    ``connect``, ``bind``, ``allocate``, ``save``, ``committed_step``,
    ``peer_path``, ``dirty``, ``close``) takes the job's lock, so concurrent
    calls wait their turn (one sync at a time, in the order the lock is
    taken), and ``close()`` waits for a running ``sync`` to finish before
    closing; any call after close raises "the job is closed".

    A step is an integer in [1, 2**63); ``sync`` refuses anything else. At
    every ``sync`` and ``save`` each tensor handed to ``bind`` must still
    have the data pointer, size and contiguity it had when bound (no
    ``resize_``, no ``set_``); otherwise the call raises without reaching
    libwex.

    ``dirty`` (a destination) is True after a failed step may have left
    this rank's tensors holding a mix of two steps, until the next committed
    step; an engine whose job is dirty should stop serving until then (or
    serve knowingly stale, mixed weights at its own risk); ``save`` refuses
    a dirty destination.
    """

    def __init__(self, config: Config, side: str, rank: int, *,
                 rendezvous: str | None = None, token: str | None = None,
                 job_id: str | None = None,
                 checkpoint: str | os.PathLike[str] | None = None) -> None:
        if side not in _SIDES:
            raise invalid("wex.Job: side must be 'source' or 'destination', "
                          "not %r" % (side,))
        if not isinstance(rank, int) or rank < 0:
            raise invalid("wex.Job: rank must be a non-negative integer, not "
                          "%r" % (rank,))
        self.side = side
        self.rank = rank
        self._handle = ctypes.c_void_p()
        # name -> the tensor whose memory wex holds (None: a checkpoint's)
        self._bound: dict[str, torch.Tensor | None] = {}
        self._allocated: dict[str, torch.Tensor] | None = None
        # (name, tensor, data_ptr, nbytes) of bind()
        self._guards: list[tuple[str, torch.Tensor, int, int]] = []
        # what bind moved into wex memory; name -> why a tensor was not
        self._adopted: list[_adopt.Group] = []
        self._adopted_names: list[str] = []
        self._not_adopted: dict[str, str] = {}
        self._transport = _adopt.transport_name(config)
        self._lock = threading.RLock()
        options = _lib.JobOptions(ctypes.sizeof(_lib.JobOptions), 0,
                                  _encode(rendezvous), _encode(token),
                                  _encode(job_id))
        check(_lib.lib().wex_job_open(_encode(_config_text(config)),
                                      _SIDES[side], rank,
                                      ctypes.byref(options),
                                      ctypes.byref(self._handle)))
        self._specs = self._read_specs()
        if checkpoint is not None:
            try:
                check(_lib.lib().wex_job_bind_checkpoint(
                    self._handle, _encode(os.fspath(checkpoint))))
            except BaseException:
                self.close()
                raise
            self._bound = {name: None for name, _, _, _ in self._specs}

    # ---- what this rank holds ---------------------------------------------

    def _read_specs(self) -> list[_Spec]:
        specs: list[_Spec] = []
        for i in range(_lib.lib().wex_job_tensor_count(self._handle)):
            t = _lib.Tensor()
            t.struct_size = ctypes.sizeof(t)
            check(_lib.lib().wex_job_tensor(self._handle, i, ctypes.byref(t)))
            specs.append((t.name.decode("utf-8"), _dtypes.NAMES[t.dtype],
                          tuple(t.shape[d] for d in range(t.ndim)), t.bytes))
        return specs

    @property
    def tensors(self) -> list[TensorSpec]:
        """This rank's local tensors, in the engine's order: TensorSpecs."""
        out = []
        for name, dtype, shape, nbytes in self._specs:
            try:
                torch_dtype = _dtypes.torch_dtype(dtype)
            except ImportError:
                torch_dtype = None
            out.append(TensorSpec(name, torch_dtype or dtype, shape, nbytes))
        return out

    def _live(self) -> ctypes.c_void_p:
        if not self._handle:
            raise invalid("wex.Job: the job is closed")
        return self._handle

    # ---- memory -----------------------------------------------------------

    def bind(self, tensors: Tensors, strict: bool = True,
             adopt: bool | None = None) -> None:
        """Hands wex this rank's tensors.

        ``tensors`` is a Mapping name -> torch.Tensor, an iterable of
        (name, tensor) pairs, or a torch.nn.Module, whose state dict names
        them (parameters and persistent buffers; tied weights share one
        storage and are bound once, under the name the job has). Every local
        tensor of the rank must be there, with its dtype, shape, on one
        device, contiguous; a name the job does not have is an error unless
        ``strict=False``. cpu tensors are host memory, cuda tensors CUDA
        memory. The job keeps a reference to each; their storage must stay
        where it is (no resize, no reallocation) for the job's life.

        ``adopt`` (a destination's cpu tensors): True moves each into
        memory wex allocates, where the transport writes fastest (shm:
        shared memory its sources copy into, where memory left in place is
        written with process_vm_writev): its bytes are copied there once
        and the storage of every tensor object handed in that shares it
        (tied weights) is swapped onto it with ``set_``, so a module's
        Parameters stay the same objects and its forward reads the synced
        weights. A tensor whose swap cannot reach every user of its memory
        (a view of a larger buffer, memory shared with a tensor not handed
        in, such as a detached ``state_dict()``; pinned memory; past the
        open-file limit, shm holding a descriptor per tensor) stays where
        it is, and ``not_adopted`` says why. None (the default) adopts
        where the job's transport writes allocated memory faster (shm);
        False binds every tensor where it lives, as sources always do
        (a source's tensors are read where they are). close() copies
        adopted tensors back into memory of torch's own.
        """
        import torch  # noqa: F401 - without torch, fail before the lock

        if adopt not in (None, True, False):
            raise invalid("bind: adopt must be True, False or None, not %r"
                          % (adopt,))
        with self._lock:
            self._bind(tensors, strict, adopt)

    @property
    def adopted(self) -> list[str]:
        """The local tensors bind moved into memory wex allocates."""
        return list(self._adopted_names)

    @property
    def not_adopted(self) -> dict[str, str]:
        """Local tensors bind considered adopting and bound in place
        instead: name -> why (empty when bind did not adopt)."""
        return dict(self._not_adopted)

    def _adopting(self, adopt: bool | None) -> bool:
        """Whether bind adopts this rank's host tensors."""
        if self.side != "destination":
            return False
        if adopt is None:
            return self._transport in _adopt.FASTER_ALLOCATED
        return adopt

    def _bind(self, tensors: Tensors, strict: bool,
              adopt: bool | None) -> None:
        import torch

        handle = self._live()
        if self._bound or self._allocated is not None:
            raise invalid("bind: this job's tensors are already bound")
        pairs = _named_tensors(tensors)
        specs = {s[0]: (i, s) for i, s in enumerate(self._specs)}
        chosen: dict[str, torch.Tensor] = {}
        problems: list[str] = []
        storages: dict[_StorageKey, str] = {}
        for name, tensor in pairs:
            if not isinstance(tensor, torch.Tensor):
                problems.append("%s: expected a torch.Tensor, got %s"
                                % (name, type(tensor).__name__))
                continue
            if name in specs:
                chosen[name] = tensor
                storages[_storage_key(tensor)] = name
        for name, tensor in pairs:
            if name in specs or not isinstance(tensor, torch.Tensor):
                continue
            if _storage_key(tensor) in storages:
                continue  # a tied weight, bound under the job's name
            if strict:
                problems.append("%s: the job's %s rank %d has no such tensor "
                                "(bind(..., strict=False) skips it)"
                                % (name, self.side, self.rank))
        for name, (index, (_, dtype, shape, nbytes)) in specs.items():
            if name not in chosen:
                problems.append("%s: missing (the %s rank %d holds it: %s %s)"
                                % (name, self.side, self.rank, dtype,
                                   list(shape)))
                continue
            why = _mismatch(chosen[name], dtype, shape)
            if why:
                problems.append("%s: %s" % (name, why))
        if problems:
            unknown = [name for name, _ in pairs if name not in specs]
            problems[0] += _modules.hint(unknown)
            raise invalid("bind: " + problems[0] +
                          ("" if len(problems) == 1 else
                           " (and %d more: %s)" % (len(problems) - 1,
                                                   "; ".join(problems[1:4]))))
        adopting = self._adopting(adopt)
        groups = _adopt.sharers(pairs) if adopting else {}
        refusals = (_adopt.refusals({name: (chosen[name], spec[3])
                                     for name, (_, spec) in specs.items()},
                                    groups) if adopting else {})
        budget, limit = _adopt.fd_budget() if adopting else (None, -1)
        moving = _adopt.within_budget(
            {name: specs[name][1][3] for name, why in refusals.items()
             if why is None}, budget)
        for name, (index, (_, _, _, nbytes)) in specs.items():
            tensor = chosen[name]
            why = refusals.get(name)
            if adopting and why is None and name not in moving:
                why = ("over the open-file limit: each adopted tensor keeps "
                       "a descriptor of wex's shared memory open, and "
                       "RLIMIT_NOFILE %d leaves room for %s (the largest "
                       "went first; raise it: ulimit -n)" % (limit, budget))
            if adopting and why is None:
                why = self._adopt(index, name, tensor, nbytes, groups)
            if why is not None or not adopting:
                if adopting and not tensor.is_cuda:
                    self._not_adopted[name] = cast(str, why)
                kind = (_lib.MEMORY_CUDA if tensor.is_cuda
                        else _lib.MEMORY_HOST)
                check(_lib.lib().wex_job_bind_memory(
                    handle, index, ctypes.c_void_p(tensor.data_ptr()),
                    nbytes, kind))
            self._bound[name] = tensor
            self._guards.append((name, tensor, tensor.data_ptr(),
                                 tensor.numel() * tensor.element_size()))

    def _adopt(self, index: int, name: str, tensor: torch.Tensor,
               nbytes: int, groups: dict[int, list[torch.Tensor]]
               ) -> str | None:
        """Allocates local tensor `index` in wex memory and moves `tensor`,
        and every tensor sharing its storage, there; or says why wex could
        not allocate it (the tensor is then bound where it lives)."""
        address = ctypes.c_void_p()
        try:
            check(_lib.lib().wex_job_alloc(self._handle, index,
                                           ctypes.byref(address)))
        except WexError as e:
            return "wex_job_alloc failed: %s" % e.message
        sharing = groups[_adopt.storage_id(tensor)]
        self._adopted.append(_adopt.move(sharing, cast(int, address.value),
                                         nbytes))
        self._adopted_names.append(name)
        return None

    def _check_bound(self, call: str) -> None:
        """Refuses a call when a bound tensor's storage moved or changed
        size since bind (libwex holds the old pointer)."""
        for name, tensor, ptr, nbytes in self._guards:
            now_ptr = tensor.data_ptr()
            now_bytes = tensor.numel() * tensor.element_size()
            if now_ptr != ptr or now_bytes != nbytes:
                raise invalid(
                    "%s: tensor %s was resized or moved since bind (data_ptr "
                    "0x%x -> 0x%x, %d -> %d bytes): bind tensors whose "
                    "storage stays put" % (call, name, ptr, now_ptr, nbytes,
                                           now_bytes))
            if not tensor.is_contiguous():
                raise invalid(
                    "%s: tensor %s is no longer contiguous since bind "
                    "(strides %s): bind tensors whose storage stays put"
                    % (call, name, list(tensor.stride())))

    def allocate(self) -> dict[str, torch.Tensor]:
        """Lets wex allocate every local tensor in memory its transport
        writes into directly (shm's one-copy path) and returns them as a
        dict name -> torch.Tensor (cpu), zeroed. They live until close()."""
        import torch  # noqa: F401 - without torch, fail before the lock

        with self._lock:
            return self._allocate()

    def _allocate(self) -> dict[str, torch.Tensor]:
        import torch

        handle = self._live()
        if self._bound or self._allocated is not None:
            raise invalid("allocate: this job's tensors are already bound")
        out: dict[str, torch.Tensor] = {}
        for index, (name, dtype, shape, nbytes) in enumerate(self._specs):
            address = ctypes.c_void_p()
            check(_lib.lib().wex_job_alloc(handle, index,
                                           ctypes.byref(address)))
            # address.value is set once wex_job_alloc succeeded; a dtype
            # this torch lacks (None) is view's to refuse.
            raw = (ctypes.c_uint8 * nbytes).from_address(
                cast(int, address.value))
            out[name] = torch.frombuffer(raw, dtype=torch.uint8).view(
                cast("torch.dtype", _dtypes.torch_dtype(dtype))).reshape(shape)
        self._allocated = out
        return dict(out)

    # ---- syncing ----------------------------------------------------------

    def connect(self) -> None:
        """Meets every other rank (layouts agreed, memory exchanged).
        Optional: sync() connects on first use."""
        with self._lock:
            check(_lib.lib().wex_job_connect(self._live()))

    def sync(self, step: int | None = None) -> SyncReport:
        """One step on this rank: sources write, destinations commit `step`
        only when everything landed (and matched). Returns a SyncReport;
        raises WexError naming the peers at fault otherwise (its
        ``missed`` is True when the step began without this rank).
        Without a step, a destination joins (see join())."""
        if step is None:
            return self.join()
        _check_step(step)
        report = _lib.SyncReport()
        report.struct_size = ctypes.sizeof(report)
        with self._lock:
            handle = self._live()
            self._check_bound("sync")
            code = _lib.lib().wex_sync(handle, step, ctypes.byref(report))
            check(code, missed=report.missed != 0)
        return _report(report)

    def join(self) -> SyncReport:
        """A destination that starts while the sources are stepping (new,
        or after a crash): waits for the next step that takes it (with
        elastic replicas, one its whole replica is at), receives it in
        full and commits it. The report's ``step`` is the step it joined;
        then sync() the steps after it. Gives up after the job's
        timeouts.join_seconds with a WexError saying why."""
        if self.side != "destination":
            raise invalid("join: this is a source: only a destination joins "
                          "a running job (a source syncs the steps it makes: "
                          "sync(step))")
        report = _lib.SyncReport()
        report.struct_size = ctypes.sizeof(report)
        step = ctypes.c_uint64()
        with self._lock:
            handle = self._live()
            self._check_bound("join")
            check(_lib.lib().wex_job_join(handle, ctypes.byref(step),
                                          ctypes.byref(report)))
        return _report(report)

    def leave(self) -> None:
        """Takes this destination out of the job between steps: the next
        step goes on without its replica (with elastic replicas, without
        failing anyone). Its tensors keep the committed step; join() brings
        it back. close() leaves too."""
        with self._lock:
            check(_lib.lib().wex_job_leave(self._live()))

    def set_placement(self, physical_to_logical: Any) -> None:
        """A destination whose engine moved its experts (EPLB): its
        ``physical_to_logical_map``, [MoE layers, physical slots] (a torch
        tensor on any device, or nested sequences of ints), the logical
        expert each slot of each MoE layer holds. The engine's adapter
        checks it as it checks options/expert_placement (a WexError naming
        the layer and the slot; nothing changes); from the next sync() on,
        every rank of the job follows it, and that step sends this rank's
        slots whole. Every rank of an engine instance hands in the same
        map."""
        import torch

        if self.side != "destination":
            raise invalid("set_placement: this is a source: only a "
                          "destination's experts move")
        try:
            rows = torch.as_tensor(physical_to_logical)
        except (TypeError, ValueError, RuntimeError) as e:
            raise invalid("set_placement: expected a [layers, slots] tensor "
                          "of logical expert numbers: %s" % e) from None
        if rows.dim() != 2 or rows.numel() == 0 or rows.is_floating_point() \
                or rows.is_complex() or rows.dtype == torch.bool:
            raise invalid("set_placement: expected a [layers, slots] tensor "
                          "of integers, got %s %s"
                          % (rows.dtype, list(rows.shape)))
        if (rows < -2**31).any() or (rows >= 2**31).any():
            raise invalid("set_placement: a logical expert number does not "
                          "fit 32 bits")
        cells = rows.detach().to("cpu", torch.int32).contiguous()
        with self._lock:
            check(_lib.lib().wex_job_set_placement(
                self._live(), cells.shape[0], cells.shape[1],
                ctypes.c_void_p(cells.data_ptr())))

    def save(self, directory: str | os.PathLike[str],
             shard_bytes: int = 5_000_000_000) -> None:
        """Writes what this side holds to `directory` (which must not exist,
        or be empty) as a Hugging Face checkpoint: canonical names and
        dtypes, shards of at most `shard_bytes` (0: one model.safetensors)
        with model.safetensors.index.json, metadata {"format": "pt"}. Every
        rank of the side calls it (connected, when there are several); the
        files are renamed into place only once every rank's bytes are
        written, so a failed save leaves no checkpoint."""
        if not isinstance(shard_bytes, int) or shard_bytes < 0:
            raise invalid("save: shard_bytes must be a non-negative integer, "
                          "not %r" % (shard_bytes,))
        with self._lock:
            handle = self._live()
            self._check_bound("save")
            check(_lib.lib().wex_job_save(handle,
                                          _encode(os.fspath(directory)),
                                          shard_bytes))

    @property
    def committed_step(self) -> int:
        """The last step this destination committed (0: none yet)."""
        with self._lock:
            return _lib.lib().wex_job_committed_step(self._live())

    @property
    def dirty(self) -> bool:
        """True when a failed step may have left this destination's tensors
        holding a mix of two steps; cleared by the next committed step
        (always False on a source). An engine whose job is dirty should stop
        serving until the next committed step (or serve knowingly stale,
        mixed weights at its own risk); save() refuses a dirty destination.
        """
        fn = _lib.job_dirty()
        with self._lock:
            return bool(fn(self._live()))

    def peer_path(self, destination_rank: int) -> str | None:
        """How this source's bytes reach `destination_rank` once connected:
        the transport's name for the way (ucx: "am" for active messages,
        "put" for one-sided puts), or the transport's own name when it has
        one way. None on a destination, before connect(), or for a rank this
        source sends nothing to."""
        if not isinstance(destination_rank, int) or destination_rank < 0:
            raise invalid("peer_path: destination_rank must be a "
                          "non-negative integer, not %r" % (destination_rank,))
        with self._lock:
            path = _lib.lib().wex_job_peer_path(self._live(),
                                                destination_rank)
        return path.decode() if path is not None else None

    # ---- the end ------------------------------------------------------------

    def close(self) -> None:
        """Leaves the job and frees what wex allocated, after copying the
        tensors bind adopted back into memory of torch's own. Idempotent;
        waits for a sync running in another thread to finish first."""
        lock = getattr(self, "_lock", None)
        if lock is None:  # __init__ failed before the lock existed
            return
        with lock:
            # the module outlives the job: its adopted tensors leave wex
            # memory before wex frees it
            while self._adopted:
                _adopt.release(self._adopted.pop())
            if self._handle:
                _lib.lib().wex_job_close(self._handle)
                self._handle = ctypes.c_void_p()
            self._bound = {}
            self._allocated = None
            self._guards = []

    def __repr__(self) -> str:
        return "<wex.Job %s rank %d, %d tensors%s>" % (
            self.side, self.rank, len(self._specs),
            "" if self._handle else ", closed")


_STEP_END = 2 ** 63


def _report(r: _lib.SyncReport) -> SyncReport:
    return SyncReport(r.step, r.committed_step, r.operations, r.bytes,
                      r.peers, r.seconds, bool(r.verified), r.attempts,
                      r.failed_over, r.puts, r.wire_bytes, r.delta_elements,
                      r.changed_elements, _lib.SYNC_MODES.get(r.mode, "mixed"),
                      r.apply_seconds, r.replicas, r.replicas_committed,
                      r.replicas_joined, r.replicas_left, r.replicas_seeded,
                      r.seeded_bytes)


def _check_step(step: object) -> None:
    """Steps are integers in [1, 2**63): refused before libwex's uint64
    would wrap them."""
    if isinstance(step, bool) or not isinstance(step, int):
        raise invalid("sync: step must be an integer in [1, 2**63), not %r "
                      "(%s)" % (step, type(step).__name__))
    if not 1 <= step < _STEP_END:
        raise invalid("sync: step must be an integer in [1, 2**63), not %d"
                      % step)


def _named_tensors(tensors: Tensors) -> list[tuple[str, object]]:
    """(name, tensor) pairs from a Mapping, an nn.Module or pairs; _bind
    refuses what is not a tensor."""
    import torch

    if isinstance(tensors, torch.nn.Module):
        return list(tensors.state_dict(keep_vars=True).items())
    if isinstance(tensors, Mapping):
        return list(tensors.items())
    try:
        return [(str(n), t) for n, t in tensors]
    except (TypeError, ValueError):
        raise TypeError("bind: expected a Mapping name -> tensor, an "
                        "iterable of (name, tensor) pairs or a "
                        "torch.nn.Module, not %s" % type(tensors).__name__)


def _storage_key(tensor: torch.Tensor) -> _StorageKey:
    """What two tensors sharing memory (tied weights) have in common."""
    return (tensor.device.type, tensor.device.index, tensor.data_ptr())


def _mismatch(tensor: torch.Tensor, dtype: str,
              shape: tuple[int, ...]) -> str | None:
    """Why `tensor` cannot be bound as a (dtype, shape) local tensor, or
    None."""
    want = _dtypes.torch_dtype(dtype)
    got_shape = tuple(tensor.shape)
    if want is None:
        return "this torch has no dtype for wex's %s" % dtype
    if tensor.dtype != want or got_shape != tuple(shape):
        return "expected %s %s, got %s %s" % (
            str(want).replace("torch.", ""), list(shape),
            str(tensor.dtype).replace("torch.", ""), list(got_shape))
    if not tensor.is_contiguous():
        return "expected a contiguous tensor, got strides %s" % (
            list(tensor.stride()),)
    if tensor.device.type not in ("cpu", "cuda"):
        return "expected a cpu or cuda tensor, got one on %s" % tensor.device
    return None
