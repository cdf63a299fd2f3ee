"""What every object holding a libwex handle shares: close() at the end of
a with block, and when the object is collected."""
from __future__ import annotations

from typing import Literal, TypeVar

_Self = TypeVar("_Self", bound="Closing")


class Closing:
    """A base for objects whose close() is idempotent and frees a libwex
    handle."""

    def close(self) -> None:  # pragma: no cover - every subclass defines it
        raise NotImplementedError

    def __enter__(self: _Self) -> _Self:
        return self

    def __exit__(self, *exc: object) -> Literal[False]:
        self.close()
        return False

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # interpreter shutdown: nothing left to do
            pass
