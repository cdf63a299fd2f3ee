"""wex.Store: a job's rendezvous served in this process."""
from __future__ import annotations

import ctypes

from . import _lib
from ._closing import Closing
from ._errors import check, invalid


class Store(Closing):
    """Serves the rendezvous every rank of a job meets at, on threads of its
    own, as ``wex store`` does: an orchestrator's rank 0 runs one and hands
    ``store.address`` ("HOST:PORT") to every rank. ``listen`` is where
    ("127.0.0.1:0": loopback, a free port); every client must present
    ``token``. Stops at close() or at the end of a ``with`` block."""

    def __init__(self, listen: str = "127.0.0.1:0",
                 token: str | None = None) -> None:
        if not token:
            raise invalid("wex.Store: a token is required (every rank "
                          "presents it)")
        self._handle = ctypes.c_void_p()
        check(_lib.lib().wex_store_open(listen.encode("utf-8"),
                                        str(token).encode("utf-8"),
                                        ctypes.byref(self._handle)))
        self.address = _lib.lib().wex_store_address(self._handle).decode()

    def close(self) -> None:
        """Stops serving; clients still connected see it go. Idempotent."""
        if self._handle:
            _lib.lib().wex_store_close(self._handle)
            self._handle = ctypes.c_void_p()

    def __repr__(self) -> str:
        return "<wex.Store %s%s>" % (self.address,
                                     "" if self._handle else ", closed")
