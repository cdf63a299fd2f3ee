"""libwex through ctypes: finding the library, and the C API's prototypes.

The library is the one bundled beside this package (``wex/lib/libwex.so``,
where ``pip install`` puts it, its plugins in ``wex/lib/wex/plugins``).
``WEX_LIBRARY`` names another one, for working from a build tree.
ctypes releases the GIL for the duration of every call, so a rank blocked
in ``wex_sync`` or ``wex_job_connect`` never holds up the interpreter.
"""
from __future__ import annotations

import ctypes
import os
from typing import TYPE_CHECKING, Callable, Protocol, cast

if TYPE_CHECKING:
    from ctypes import _CArgObject, _CDataType

    # (restype, argtypes) of one C function, as ctypes takes them.
    Prototype = tuple[type[_CDataType] | None, list[type[_CDataType]]]

_HERE = os.path.dirname(os.path.abspath(__file__))

# sdk/include/wex/abi.h, host.h and transport.h, as fixed-size integers
# (tests/python/test_mirrors.py compares them with the C headers).
SIDE_SOURCE = 0
SIDE_DESTINATION = 1
MEMORY_HOST = 0
MEMORY_CUDA = 1

STATUS_NAMES = {
    0: "OK",
    1: "IN_PROGRESS",
    -1: "INVALID",
    -2: "UNSUPPORTED",
    -3: "OUT_OF_MEMORY",
    -4: "SYSTEM",
    -5: "TIMEOUT",
    -6: "PEER_FAILURE",
    -7: "INTERNAL",
    -8: "ABI_MISMATCH",
}

# The same codes by their C macro names (WexError.name).
STATUS_MACROS = {
    0: "WEX_OK",
    1: "WEX_INPROGRESS",
    -1: "WEX_ERR_INVALID",
    -2: "WEX_ERR_UNSUPPORTED",
    -3: "WEX_ERR_NOMEM",
    -4: "WEX_ERR_SYSTEM",
    -5: "WEX_ERR_TIMEOUT",
    -6: "WEX_ERR_PEER",
    -7: "WEX_ERR_INTERNAL",
    -8: "WEX_ERR_ABI",
}


# The mirrors' fields are annotated as ctypes reads them back (a char *
# as bytes, None for NULL), for type checkers; _fields_ is the layout.
class JobOptions(ctypes.Structure):
    """wex_job_options."""
    struct_size: int
    reserved0: int
    rendezvous: bytes | None
    token: bytes | None
    job_id: bytes | None
    _fields_ = [("struct_size", ctypes.c_uint32), ("reserved0", ctypes.c_uint32),
                ("rendezvous", ctypes.c_char_p), ("token", ctypes.c_char_p),
                ("job_id", ctypes.c_char_p)]


class Tensor(ctypes.Structure):
    """wex_tensor."""
    struct_size: int
    dtype: int
    ndim: int
    reserved0: int
    name: bytes  # never NULL once wex_job_tensor succeeded
    shape: ctypes._Pointer[ctypes.c_uint64]
    bytes: int
    _fields_ = [("struct_size", ctypes.c_uint32), ("dtype", ctypes.c_uint32),
                ("ndim", ctypes.c_uint32), ("reserved0", ctypes.c_uint32),
                ("name", ctypes.c_char_p), ("shape", ctypes.POINTER(ctypes.c_uint64)),
                ("bytes", ctypes.c_uint64)]


class SyncReport(ctypes.Structure):
    """wex_sync_report."""
    struct_size: int
    verified: int
    step: int
    committed_step: int
    operations: int
    bytes: int
    peers: int
    seconds: float
    attempts: int
    missed: int
    failed_over: int
    puts: int
    wire_bytes: int
    delta_elements: int
    changed_elements: int
    mode: int
    reserved0: int
    apply_seconds: float
    replicas: int
    replicas_committed: int
    replicas_joined: int
    replicas_left: int
    replicas_seeded: int
    seeded_bytes: int
    _fields_ = [("struct_size", ctypes.c_uint32), ("verified", ctypes.c_int32),
                ("step", ctypes.c_uint64), ("committed_step", ctypes.c_uint64),
                ("operations", ctypes.c_uint64), ("bytes", ctypes.c_uint64),
                ("peers", ctypes.c_uint64), ("seconds", ctypes.c_double),
                ("attempts", ctypes.c_uint32), ("missed", ctypes.c_uint32),
                ("failed_over", ctypes.c_uint64), ("puts", ctypes.c_uint64),
                ("wire_bytes", ctypes.c_uint64),
                ("delta_elements", ctypes.c_uint64),
                ("changed_elements", ctypes.c_uint64),
                ("mode", ctypes.c_uint32), ("reserved0", ctypes.c_uint32),
                ("apply_seconds", ctypes.c_double),
                ("replicas", ctypes.c_uint64),
                ("replicas_committed", ctypes.c_uint64),
                ("replicas_joined", ctypes.c_uint64),
                ("replicas_left", ctypes.c_uint64),
                ("replicas_seeded", ctypes.c_uint64),
                ("seeded_bytes", ctypes.c_uint64)]

# wex_sync_report.mode (wex.h: WEX_SYNC_FULL, _DELTA, _MIXED), by name
SYNC_MODES = {0: "full", 1: "delta", 2: "mixed"}


def library_path() -> str:
    """Where libwex is: $WEX_LIBRARY, else the copy bundled with wex."""
    override = os.environ.get("WEX_LIBRARY")
    if override:
        return override
    for name in ("libwex.so", "libwex.so.0"):
        path = os.path.join(_HERE, "lib", name)
        if os.path.exists(path):
            return path
    raise ImportError(
        "wex: libwex.so is not beside the package (%s/lib); install wex with "
        "'pip install .' from the source tree, or set WEX_LIBRARY to a built "
        "libwex.so" % _HERE)


def prototypes() -> dict[str, Prototype]:
    """Every C function the package calls: name -> (restype, argtypes).
    tests/python/test_mirrors.py checks it against sdk/include/wex/wex.h."""
    p = ctypes.POINTER
    vp, cp, st = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int32
    u32, u64, i64 = ctypes.c_uint32, ctypes.c_uint64, ctypes.c_int64
    return {
        "wex_job_open": (st, [cp, u32, u64, p(JobOptions), p(vp)]),
        "wex_job_close": (None, [vp]),
        "wex_job_tensor_count": (u64, [vp]),
        "wex_job_tensor": (st, [vp, u64, p(Tensor)]),
        "wex_job_bind": (st, [vp, u64, vp, u64]),
        "wex_job_alloc": (st, [vp, u64, p(vp)]),
        "wex_job_bind_memory": (st, [vp, u64, vp, u64, u32]),
        "wex_job_alloc_memory": (st, [vp, u64, u32, p(vp)]),
        "wex_job_bind_checkpoint": (st, [vp, cp]),
        "wex_job_save": (st, [vp, cp, u64]),
        "wex_job_connect": (st, [vp]),
        "wex_sync": (st, [vp, u64, p(SyncReport)]),
        "wex_job_join": (st, [vp, vp, p(SyncReport)]),
        "wex_job_leave": (st, [vp]),
        "wex_job_set_placement": (st, [vp, u64, u64, vp]),
        "wex_job_committed_step": (u64, [vp]),
        "wex_job_peer_path": (cp, [vp, u64]),
        "wex_last_error": (cp, []),
        "wex_version": (cp, []),
        "wex_store_open": (st, [cp, cp, p(vp)]),
        "wex_store_address": (cp, [vp]),
        "wex_store_close": (None, [vp]),
        "wex_layout_json": (st, [cp, cp, cp, cp, i64, p(vp)]),
        "wex_plan_json": (st, [cp, u32, i64, p(vp)]),
        "wex_free": (None, [vp]),
    }


def optional_prototypes() -> dict[str, Prototype]:
    """Functions looked up on first use, so the package still loads an
    older libwex without them."""
    return {"wex_job_dirty": (ctypes.c_int, [ctypes.c_void_p])}


def _prototypes(lib: ctypes.CDLL) -> ctypes.CDLL:
    for name, (restype, argtypes) in prototypes().items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes
    return lib


class Libwex(Protocol):
    """libwex's functions as the prototypes above make ctypes call them:
    a uint64, int32 or int as int, a const char * as bytes (None where C
    may return NULL), a handle as c_void_p, a pointer argument as what
    ctypes.byref returns. What lib() is, to a type checker."""

    def wex_job_open(self, config: bytes | None, side: int, rank: int,
                     options: _CArgObject, job_p: _CArgObject, /) -> int: ...
    def wex_job_close(self, job: ctypes.c_void_p, /) -> None: ...
    def wex_job_tensor_count(self, job: ctypes.c_void_p, /) -> int: ...
    def wex_job_tensor(self, job: ctypes.c_void_p, index: int,
                       tensor: _CArgObject, /) -> int: ...
    def wex_job_bind(self, job: ctypes.c_void_p, index: int,
                     data: ctypes.c_void_p, nbytes: int, /) -> int: ...
    def wex_job_alloc(self, job: ctypes.c_void_p, index: int,
                      data_p: _CArgObject, /) -> int: ...
    def wex_job_bind_memory(self, job: ctypes.c_void_p, index: int,
                            data: ctypes.c_void_p, nbytes: int, kind: int,
                            /) -> int: ...
    def wex_job_alloc_memory(self, job: ctypes.c_void_p, index: int,
                             kind: int, data_p: _CArgObject, /) -> int: ...
    def wex_job_bind_checkpoint(self, job: ctypes.c_void_p,
                                directory: bytes | None, /) -> int: ...
    def wex_job_save(self, job: ctypes.c_void_p, directory: bytes | None,
                     shard_bytes: int, /) -> int: ...
    def wex_job_connect(self, job: ctypes.c_void_p, /) -> int: ...
    def wex_sync(self, job: ctypes.c_void_p, step: int,
                 report: _CArgObject, /) -> int: ...
    def wex_job_join(self, job: ctypes.c_void_p, step_p: _CArgObject,
                     report: _CArgObject, /) -> int: ...
    def wex_job_leave(self, job: ctypes.c_void_p, /) -> int: ...
    def wex_job_set_placement(self, job: ctypes.c_void_p, layers: int,
                              physical: int, map: ctypes.c_void_p,
                              /) -> int: ...
    def wex_job_committed_step(self, job: ctypes.c_void_p, /) -> int: ...
    def wex_job_peer_path(self, job: ctypes.c_void_p,
                          destination_rank: int, /) -> bytes | None: ...
    def wex_last_error(self) -> bytes | None: ...
    def wex_version(self) -> bytes: ...
    def wex_store_open(self, listen: bytes | None, token: bytes | None,
                       store_p: _CArgObject, /) -> int: ...
    def wex_store_address(self, store: ctypes.c_void_p, /) -> bytes: ...
    def wex_store_close(self, store: ctypes.c_void_p, /) -> None: ...
    def wex_layout_json(self, model: bytes | None, engine: bytes | None,
                        parallel: bytes | None, options: bytes | None,
                        rank: int, json_p: _CArgObject, /) -> int: ...
    def wex_plan_json(self, config: bytes | None, side: int, rank: int,
                      json_p: _CArgObject, /) -> int: ...
    def wex_free(self, pointer: ctypes.c_void_p, /) -> None: ...


_lib: ctypes.CDLL | None = None
_job_dirty: Callable[[ctypes.c_void_p], int] | None = None


def job_dirty() -> Callable[[ctypes.c_void_p], int]:
    """wex_job_dirty, looked up on first use so that the package still
    loads an older libwex without it; a clear ImportError when missing."""
    global _job_dirty
    if _job_dirty is None:
        try:
            fn = _loaded().wex_job_dirty
        except AttributeError:
            raise ImportError(
                "wex: this libwex (%s) has no wex_job_dirty: Job.dirty needs "
                "a newer libwex" % library_path()) from None
        fn.restype, fn.argtypes = optional_prototypes()["wex_job_dirty"]
        _job_dirty = fn
    return _job_dirty


def has_job_dirty() -> bool:
    """Whether the loaded libwex exports wex_job_dirty."""
    return hasattr(lib(), "wex_job_dirty")


def _loaded() -> ctypes.CDLL:
    global _lib
    if _lib is None:
        _lib = _prototypes(ctypes.CDLL(library_path()))
    return _lib


def lib() -> Libwex:
    """The loaded libwex (loaded on first use)."""
    return cast("Libwex", _loaded())
