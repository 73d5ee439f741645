"""The closed sets of codes of wire v1 (docs/capwire.md, "Denial codes" and
"Fatal codes"), with the spec's retry verdicts. A test checks that the
spec's tables list exactly these."""

from __future__ import annotations

from typing import Final

# Denial codes: a `denied` frame answers one call; the connection lives on.
BAD_REQUEST: Final = "bad_request"
UNKNOWN_CAPABILITY: Final = "unknown_capability"
NOT_GRANTED: Final = "not_granted"
UNKNOWN_TOOL: Final = "unknown_tool"
BAD_ARGUMENTS: Final = "bad_arguments"
SERVER_UNAVAILABLE: Final = "server_unavailable"
TIMEOUT: Final = "timeout"
CANCELLED: Final = "cancelled"
SERVER_ERROR: Final = "server_error"
RESULT_MALFORMED: Final = "result_malformed"
RESULT_TOO_LARGE: Final = "result_too_large"
OVERLOADED: Final = "overloaded"
REVOKED: Final = "revoked"
SHUTTING_DOWN: Final = "shutting_down"
SURFACE_CHANGED: Final = "surface_changed"
INPUT_REQUIRED: Final = "input_required"
QUOTA_EXCEEDED: Final = "quota_exceeded"

# Fatal codes: a `fatal` frame ends the connection.
BAD_FRAME: Final = "bad_frame"
FRAME_TOO_LARGE: Final = "frame_too_large"
BAD_HELLO: Final = "bad_hello"
BAD_TOKEN: Final = "bad_token"
UNSUPPORTED_VERSION: Final = "unsupported_version"

DENIAL_CODES: Final = frozenset({
    BAD_REQUEST, UNKNOWN_CAPABILITY, NOT_GRANTED, UNKNOWN_TOOL, BAD_ARGUMENTS,
    SERVER_UNAVAILABLE, TIMEOUT, CANCELLED, SERVER_ERROR, RESULT_MALFORMED,
    RESULT_TOO_LARGE, OVERLOADED, REVOKED, SHUTTING_DOWN, SURFACE_CHANGED, INPUT_REQUIRED,
    QUOTA_EXCEEDED,
})
FATAL_CODES: Final = frozenset({BAD_FRAME, FRAME_TOO_LARGE, BAD_HELLO, BAD_TOKEN, UNSUPPORTED_VERSION})
_RETRYABLE: Final = frozenset({SERVER_UNAVAILABLE, TIMEOUT, OVERLOADED})


def is_denial_code(code: str) -> bool:
    """Reports whether code is one of the v1 denial codes."""
    return code in DENIAL_CODES


def is_fatal_code(code: str) -> bool:
    """Reports whether code is one of the v1 fatal codes."""
    return code in FATAL_CODES


def retryable(code: str) -> bool:
    """Reports whether repeating a call denied with code can succeed without
    changing the call: True for server_unavailable, timeout and overloaded
    (after a pause; a timed-out call may have taken effect), False for every
    other code, including codes this version does not know. server_error is
    False: whether the server's failure is transient depends on its
    rpc_code, which only the caller can judge."""
    return code in _RETRYABLE
