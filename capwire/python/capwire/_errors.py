"""Errors a client raises. Each class carries what the spec's frame or
fault carries, under the spec's names; has_code is Go's
errors.Is(err, capwire.ErrTimeout): it matches any of them by code,
following __cause__."""

from __future__ import annotations

from typing import Optional


class CapwireError(Exception):
    """Base class of every error this package raises."""


class Denied(CapwireError):
    """A call that capbridge refused or could not complete: the content of a
    `denied` frame. A tool that ran and failed is a Result with is_error,
    not a Denied."""

    def __init__(self, code: str, message: str = "", path: str = "", rpc_code: Optional[int] = None,
                 quota: str = "", retry_ms: Optional[int] = None) -> None:
        s = "capwire: denied: " + code
        if path:
            s += " at " + path
        if rpc_code is not None:
            s += f" (rpc code {rpc_code})"
        if quota:
            s += f" (quota {quota}" + (f", retry in {retry_ms} ms" if retry_ms is not None else "") + ")"
        if message:
            s += ": " + message
        super().__init__(s)
        #: A denial code; an unknown code from a newer peer is carried as is.
        self.code = code
        #: capbridge's words, for people; never parse them.
        self.message = message
        #: An RFC 6901 pointer into args (bad_arguments) or the result (result_malformed), or "".
        self.path = path
        #: The MCP server's JSON-RPC error code, for server_error; None when absent.
        self.rpc_code = rpc_code
        #: For quota_exceeded: the quota hit, as "[scope:]kind" ("rate", "github:calls"); "" otherwise.
        self.quota = quota
        #: For quota_exceeded of a rate: milliseconds until the next call is allowed; None for a total.
        self.retry_ms = retry_ms


class Fatal(CapwireError):
    """The `fatal` frame capbridge ended the connection with. dial raises it;
    a connection that ends this way fails its calls with a Closed whose
    __cause__ is it."""

    def __init__(self, code: str, message: str = "") -> None:
        super().__init__("capwire: fatal: " + code + (": " + message if message else ""))
        self.code = code
        self.message = message


class WireError(CapwireError):
    """A fault in the bytes capbridge sent: a broken frame (bad_frame,
    frame_too_large; fatal) or a well-framed envelope that is malformed
    (bad_request). path points into the envelope, offset is the byte in the
    payload where the fault was found (-1 if unknown), id is the call the
    envelope named when it had a usable one."""

    def __init__(self, code: str, fatal: bool, msg: str, path: str = "", offset: int = -1,
                 type: str = "", id: Optional[int] = None) -> None:
        s = "capwire: " + code
        if path:
            s += " at " + path
        if offset >= 0:
            s += f" (offset {offset})"
        if id is not None:
            s += f" in call {id}"
        super().__init__(s + ": " + msg)
        self.code = code
        self.fatal = fatal
        self.path = path
        self.offset = offset
        self.type = type
        self.id = id


class Closed(CapwireError):
    """The connection is gone: closed by close(), hung up by capbridge, ended
    by a fatal frame or a broken frame, or a write that failed or stalled.
    Every call waiting on the connection, and every later one, raises it;
    __cause__ says why. Dial again to go on."""

    def __init__(self, why: str = "") -> None:
        super().__init__("capwire: connection closed" + (": " + why if why else ""))


class NoEnv(CapwireError):
    """CAPBRIDGE_SOCKET or CAPBRIDGE_TOKEN is not set: not running under capbridge."""

    def __init__(self) -> None:
        super().__init__("capwire: CAPBRIDGE_SOCKET and CAPBRIDGE_TOKEN must both be set")


def has_code(err: Optional[BaseException], code: str) -> bool:
    """Reports whether err, or an error in its __cause__ chain, is a Denied,
    Fatal or WireError carrying code."""
    n = 0
    while err is not None and n < 32:
        if isinstance(err, (Denied, Fatal, WireError)) and err.code == code:
            return True
        err = err.__cause__
        n += 1
    return False
