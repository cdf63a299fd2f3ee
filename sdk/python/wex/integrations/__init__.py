"""Code that runs inside inference engines, opening an engine worker's
side of a wex job from the worker itself (docs/python.md, "Inside the
engines").

- ``wex.integrations.vllm``: ``WexWorkerExtension``, for vLLM's
  ``--worker-extension-cls``; the trainer calls ``wex_open``, ``wex_sync``
  and ``wex_close`` on every worker through ``collective_rpc``.
- ``wex.integrations.sglang``: ``load_weights``, for SGLang's
  ``--custom-weight-loader``; the trainer sends ``open_request``,
  ``sync_request`` and ``close_request`` through
  ``update_weights_from_tensor``.

Neither module imports its engine until a worker asks for its
coordinates, so both import (and are tested) where the engine is not
installed; every coordinate may also be given explicitly.
"""
