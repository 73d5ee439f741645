"""capwire: the Python client of capbridge's capability wire
(docs/capwire.md, wire v1), with no dependency outside the standard
library.

asyncio::

    async with await capwire.from_env() as c:
        r = await c.call("github", "create_issue", {"title": "Crash"}, timeout=30)
        print(r.text())

blocking::

    with capwire.BlockingClient.from_env() as c:
        r = c.call("github", "create_issue", {"title": "Crash"})

A tool that ran and failed is a Result with is_error; a refused call
raises Denied (has_code(err, capwire.TIMEOUT) etc.); a connection that is
gone raises Closed.
"""

from ._blocking import BlockingClient, shared_blocking
from ._client import (ENV_SOCKET, ENV_TOKEN, Client, collect, describe, dial, drop, from_env, read_resource, search, shared,
                      start)
from ._codes import (BAD_ARGUMENTS, BAD_FRAME, BAD_HELLO, BAD_REQUEST, BAD_TOKEN, CANCELLED, DENIAL_CODES,
                     FATAL_CODES, FRAME_TOO_LARGE, INPUT_REQUIRED, NOT_GRANTED, OVERLOADED, QUOTA_EXCEEDED, RESULT_MALFORMED,
                     RESULT_TOO_LARGE, REVOKED, SERVER_ERROR, SERVER_UNAVAILABLE, SHUTTING_DOWN, SURFACE_CHANGED, TIMEOUT,
                     UNKNOWN_CAPABILITY, UNKNOWN_TOOL, UNSUPPORTED_VERSION, is_denial_code, is_fatal_code, retryable)
from ._envelope import CAP_BRIDGE, CAP_PREFIX, DEFAULT_MAX_FRAME, VERSION, decode, encode_args, encode_call, encode_cancel, encode_hello
from ._errors import CapwireError, Closed, Denied, Fatal, NoEnv, WireError, has_code
from ._msgpack import ExtType
from ._result import Block, Result
from ._shape import DecodeError, Shape, Shapes, decode_structured

__all__ = [
    "BlockingClient", "shared_blocking", "ENV_SOCKET", "ENV_TOKEN", "Client", "dial", "from_env", "shared",
    "describe", "search", "read_resource", "start", "collect", "drop", "CAP_BRIDGE",
    "BAD_ARGUMENTS", "BAD_FRAME", "BAD_HELLO", "BAD_REQUEST", "BAD_TOKEN", "CANCELLED", "DENIAL_CODES",
    "FATAL_CODES", "FRAME_TOO_LARGE", "INPUT_REQUIRED", "NOT_GRANTED", "OVERLOADED", "QUOTA_EXCEEDED", "RESULT_MALFORMED", "RESULT_TOO_LARGE",
    "REVOKED", "SERVER_ERROR", "SERVER_UNAVAILABLE", "SHUTTING_DOWN", "SURFACE_CHANGED", "TIMEOUT", "UNKNOWN_CAPABILITY",
    "UNKNOWN_TOOL", "UNSUPPORTED_VERSION", "is_denial_code", "is_fatal_code", "retryable",
    "CAP_PREFIX", "DEFAULT_MAX_FRAME", "VERSION", "decode", "encode_args", "encode_call", "encode_cancel",
    "encode_hello", "CapwireError", "Closed", "Denied", "Fatal", "NoEnv", "WireError", "has_code",
    "ExtType", "Block", "Result", "DecodeError", "Shape", "Shapes", "decode_structured",
]
