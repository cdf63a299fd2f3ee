"""What every object holding a libwex handle shares: close() at the end of
a with block, and when the object is collected."""


class Closing:
    """A base for objects whose close() is idempotent and frees a libwex
    handle."""

    def close(self):  # pragma: no cover - every subclass defines it
        raise NotImplementedError

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown: nothing left to do
            pass
