"""WexError: what every failing libwex call raises."""
from . import _lib


class WexError(RuntimeError):
    """A libwex call failed. ``status`` names the error class (``"INVALID"``,
    ``"PEER_FAILURE"``, ``"TIMEOUT"``, ...; see sdk/include/wex/abi.h),
    ``code`` is the C ``wex_status`` and ``name`` its C macro
    (``"WEX_ERR_PEER"``), and the message is libwex's one line.
    ``missed`` is True when ``sync(step)`` failed because that step had
    begun without this rank (it rejoined while the step ran): nothing was
    written, and the rank goes on with a later step."""

    def __init__(self, code: int, message: str,
                 missed: bool = False) -> None:
        self.code = int(code)
        self.missed = bool(missed)
        self.status = _lib.STATUS_NAMES.get(self.code, "UNKNOWN")
        self.name = _lib.STATUS_MACROS.get(self.code, "UNKNOWN")
        self.message = message
        super().__init__("%s: %s" % (self.status, message))


def invalid(message: str) -> WexError:
    """A WexError of status INVALID raised by the package itself."""
    return WexError(-1, message)


def check(code: int, missed: bool = False) -> int:
    """Raises WexError with libwex's last error unless `code` is WEX_OK."""
    if code != 0:
        text = _lib.lib().wex_last_error()
        raise WexError(code, text.decode("utf-8", "replace") if text else "",
                       missed)
    return code
