"""wex: weight exchange for reinforcement learning on large language models.

The Python face of libwex (ctypes, no compiled extension): a trainer rank
and an inference rank each open their side of a job, bind their model's
tensors where they already are, and call ``sync(step)`` after every
optimizer step::

    import wex
    with wex.Job("job.json", "destination", rank) as job:
        job.bind(model)            # the engine's own state-dict names
        for step in range(1, n + 1):
            job.sync(step)

torch is imported only when tensors are bound or listed with their torch
dtypes; ``import wex`` needs nothing but libwex, bundled beside this file.
"""
from ._errors import WexError
from ._job import Job, SyncReport, TensorSpec
from ._store import Store
from ._documents import layout, plan
from ._modules import module_layout
from . import _lib


def _version() -> str:
    try:
        return _lib.lib().wex_version().decode("ascii")
    except (ImportError, OSError):
        return "unknown"


__version__ = _version()

__all__ = ["Job", "Store", "SyncReport", "TensorSpec", "WexError", "layout",
           "module_layout",
           "plan", "__version__"]
