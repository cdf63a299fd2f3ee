"""libwex through ctypes: finding the library, and the C API's prototypes.

The library is the one bundled beside this package (``wex/lib/libwex.so``,
where ``pip install`` puts it, its plugins in ``wex/lib/wex/plugins``).
``WEX_LIBRARY`` names another one, for working from a build tree.
ctypes releases the GIL for the duration of every call, so a rank blocked
in ``wex_sync`` or ``wex_job_connect`` never holds up the interpreter.
"""
import ctypes
import os

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


class JobOptions(ctypes.Structure):
    """wex_job_options."""
    _fields_ = [("struct_size", ctypes.c_uint32), ("reserved0", ctypes.c_uint32),
                ("rendezvous", ctypes.c_char_p), ("token", ctypes.c_char_p),
                ("job_id", ctypes.c_char_p)]


class Tensor(ctypes.Structure):
    """wex_tensor."""
    _fields_ = [("struct_size", ctypes.c_uint32), ("dtype", ctypes.c_uint32),
                ("ndim", ctypes.c_uint32), ("reserved0", ctypes.c_uint32),
                ("name", ctypes.c_char_p), ("shape", ctypes.POINTER(ctypes.c_uint64)),
                ("bytes", ctypes.c_uint64)]


class SyncReport(ctypes.Structure):
    """wex_sync_report."""
    _fields_ = [("struct_size", ctypes.c_uint32), ("verified", ctypes.c_int32),
                ("step", ctypes.c_uint64), ("committed_step", ctypes.c_uint64),
                ("operations", ctypes.c_uint64), ("bytes", ctypes.c_uint64),
                ("peers", ctypes.c_uint64), ("seconds", ctypes.c_double),
                ("attempts", ctypes.c_uint32), ("missed", ctypes.c_uint32),
                ("failed_over", ctypes.c_uint64), ("puts", ctypes.c_uint64)]


def library_path():
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


def prototypes():
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


def optional_prototypes():
    """Functions looked up on first use, so the package still loads an
    older libwex without them."""
    return {"wex_job_dirty": (ctypes.c_int, [ctypes.c_void_p])}


def _prototypes(lib):
    for name, (restype, argtypes) in prototypes().items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes
    return lib


_lib = None
_job_dirty = None


def job_dirty():
    """wex_job_dirty, looked up on first use so that the package still
    loads an older libwex without it; a clear ImportError when missing."""
    global _job_dirty
    if _job_dirty is None:
        try:
            fn = lib().wex_job_dirty
        except AttributeError:
            raise ImportError(
                "wex: this libwex (%s) has no wex_job_dirty: Job.dirty needs "
                "a newer libwex" % library_path()) from None
        fn.restype, fn.argtypes = optional_prototypes()["wex_job_dirty"]
        _job_dirty = fn
    return _job_dirty


def has_job_dirty():
    """Whether the loaded libwex exports wex_job_dirty."""
    return hasattr(lib(), "wex_job_dirty")


def lib():
    """The loaded libwex (loaded on first use)."""
    global _lib
    if _lib is None:
        _lib = _prototypes(ctypes.CDLL(library_path()))
    return _lib
