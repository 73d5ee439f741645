"""Envelopes (docs/capwire.md, "Envelopes"): the client's encoders (hello,
call, cancel) and a total decoder for what capbridge sends (welcome,
result, denied, fatal): any payload gives a message or raises WireError,
the same faults the Go decoder (capwire/envelope.go) reports."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Optional, Union

from . import _codes as codes
from ._errors import WireError
from ._msgpack import (ARRAY, BIN, FALSE, MAP, MAX_DEPTH, NEGINT, NIL, STR, TRUE, UINT, Head, Malformed,
                       Writer, check, read_head, skip, unpack)
from ._result import OTHER, TEXT, Block, Result

#: The wire version this package speaks.
VERSION = 1
#: Starts every capability name in v1: a call's cap is "mcp.<server>".
CAP_PREFIX = "mcp."
# The capability of capbridge itself: describe, search and read_resource
# within the grant.
CAP_BRIDGE = "capbridge"
#: The default frame payload limit: 16 MiB.
DEFAULT_MAX_FRAME = 16 << 20

_KNOWN_TYPES = frozenset({"hello", "welcome", "call", "cancel", "result", "denied", "fatal"})
_FIELDS = frozenset({"t", "v", "token", "servers", "id", "cap", "op", "args", "timeout_ms",
                     "is_error", "content", "structured", "truncated", "code", "message", "path", "rpc_code",
                     "traceparent", "quota", "retry_ms"})


def known_type(t: str) -> bool:
    """Reports whether t is a v1 envelope type."""
    return t in _KNOWN_TYPES


@dataclass(frozen=True)
class Welcome:
    v: int
    servers: tuple[str, ...]


@dataclass(frozen=True)
class ResultMsg:
    id: int
    result: Result


@dataclass(frozen=True)
class DeniedMsg:
    id: Optional[int]
    code: str
    message: str
    path: str
    rpc_code: Optional[int]
    quota: str = ""
    retry_ms: Optional[int] = None


@dataclass(frozen=True)
class FatalMsg:
    code: str
    message: str


@dataclass(frozen=True)
class ClientMsg:
    """An envelope a client sends (hello, call, cancel), which capbridge must not."""
    t: str


Message = Union[Welcome, ResultMsg, DeniedMsg, FatalMsg, ClientMsg]


# --- Encoding: one fixed key order per type, every value in its shortest
# form, so equal messages encode to equal bytes.

def _frame(typ: str, w: Writer, max_frame: int) -> bytes:
    n = len(w.buf)
    if n > max_frame:
        raise WireError(codes.FRAME_TOO_LARGE, True, f"encoding {typ}: payload of {n} bytes exceeds the limit of {max_frame}")
    return n.to_bytes(4, "big") + bytes(w.buf)


def encode_hello(token: str, max_frame: int = DEFAULT_MAX_FRAME) -> bytes:
    w = Writer()
    w.header(0x80, 0xde, 3)
    w.string("t")
    w.string("hello")
    w.string("v")
    w.uint(VERSION)
    w.string("token")
    w.string(token)
    return _frame("hello", w, max_frame)


def encode_cancel(id: int, max_frame: int = DEFAULT_MAX_FRAME) -> bytes:
    w = Writer()
    w.header(0x80, 0xde, 2)
    w.string("t")
    w.string("cancel")
    w.string("id")
    w.uint(id)
    return _frame("cancel", w, max_frame)


def encode_args(args: object) -> bytes:
    """Encodes a call's arguments as one MessagePack map: None means {};
    values are None, bool, int, float, str, bytes-like (binary data), list,
    tuple and dict with str keys. Anything else is a TypeError naming where
    it is."""
    if args is None:
        return b"\x80"
    if not isinstance(args, dict):
        raise TypeError("capwire: encoding call: args: want a dict")
    w = Writer()
    w.value(args, "", 0)
    out = bytes(w.buf)
    fault = check(out)
    if fault:
        raise TypeError("capwire: encoding call: args: " + fault)
    return out


def encode_call(id: int, cap: str, op: str, args: bytes, timeout_ms: int = 0,
                max_frame: int = DEFAULT_MAX_FRAME, traceparent: str = "") -> bytes:
    """Encodes a call frame around args, an encoded map (encode_args);
    timeout_ms 0 means none given, traceparent "" none."""
    if not cap or not op:
        raise ValueError("capwire: encoding call: cap/op: must not be empty")
    w = Writer()
    w.header(0x80, 0xde, 5 + (1 if timeout_ms else 0) + (1 if traceparent else 0))
    w.string("t")
    w.string("call")
    w.string("id")
    w.uint(id)
    w.string("cap")
    w.string(cap)
    w.string("op")
    w.string(op)
    if timeout_ms:
        w.string("timeout_ms")
        w.uint(timeout_ms)
    if traceparent:
        w.string("traceparent")
        w.string(traceparent)
    w.string("args")
    w.buf += args
    return _frame("call", w, max_frame)


# --- Decoding: a port of the Go decoder's rules.

def _utf8(p: bytes) -> Optional[str]:
    try:
        return p.decode("utf-8")
    except UnicodeDecodeError:
        return None


class _Envelope:
    def __init__(self, b: bytes) -> None:
        self.b = b
        self.fields: dict[str, tuple[int, int]] = {}
        self.early: Optional[tuple[str, int, str]] = None
        self.typ = ""
        self.id: Optional[int] = None

    def fault(self, msg: str, path: str = "", offset: int = -1) -> WireError:
        return WireError(codes.BAD_REQUEST, False, msg, path, offset, self.typ, self.id)

    def fail_at(self, f: str, sub: str, msg: str) -> WireError:
        return self.fault(msg, "/" + f + sub, self.fields[f][0] if f in self.fields else -1)

    def head(self, f: str) -> Optional[Head]:
        s = self.fields.get(f)
        return None if s is None else read_head(self.b, s[0])

    def require(self, f: str) -> Head:
        h = self.head(f)
        if h is None:
            raise self.fault(f'missing "{f}"')
        return h

    def present(self, f: str) -> bool:
        h = self.head(f)
        return h is not None and h.kind != NIL

    def uint(self, f: str) -> int:
        h = self.require(f)
        if h.kind != UINT:
            raise self.fail_at(f, "", "want an unsigned integer")
        return h.v

    def boolean(self, f: str) -> bool:
        h = self.require(f)
        if h.kind == TRUE:
            return True
        if h.kind == FALSE:
            return False
        raise self.fail_at(f, "", "want a boolean")

    def str_at(self, i: int, f: str, sub: str) -> str:
        h = read_head(self.b, i)
        if h.kind != STR:
            raise self.fail_at(f, sub, "want a string")
        s = _utf8(self.b[h.off:h.end()])
        if s is None:
            raise self.fail_at(f, sub, "invalid UTF-8")
        return s

    def string(self, f: str) -> str:
        self.require(f)
        return self.str_at(self.fields[f][0], f, "")

    def non_empty(self, f: str) -> str:
        s = self.string(f)
        if not s:
            raise self.fail_at(f, "", "must not be empty")
        return s

    def opt_str(self, f: str) -> str:
        return self.string(f) if self.present(f) else ""

    def raw(self, f: str) -> bytes:
        at, end = self.fields[f]
        return self.b[at:end]


def _bad_frame(offset: int, msg: str) -> WireError:
    return WireError(codes.BAD_FRAME, True, msg, offset=offset)


def _escape(key: bytes) -> str:
    s = _utf8(key)
    if s is None:
        s = json.dumps(list(key))
    return s.replace("~", "~0").replace("/", "~1")


def decode(b: bytes) -> Message:
    """Decodes one frame's payload. A payload that is not exactly one
    well-formed map is a fatal bad_frame; anything else wrong (missing or
    unknown "t", wrong field types, nesting over 128, invalid UTF-8, a
    duplicated key) is a non-fatal bad_request carrying the frame's id when
    it had a usable one."""
    e = _Envelope(bytes(b))
    _scan(e)
    _classify(e)
    if e.early is not None:
        path, offset, msg = e.early
        raise e.fault(msg, path, offset)
    if e.typ == "welcome":
        return _welcome(e)
    if e.typ == "result":
        return _result(e)
    if e.typ == "denied":
        return _denied(e)
    if e.typ == "fatal":
        return FatalMsg(e.non_empty("code"), e.opt_str("message"))
    if e.typ in ("hello", "call", "cancel"):
        return ClientMsg(e.typ)
    raise e.fail_at("t", "", "unknown envelope type " + json.dumps(e.typ))


def _scan(e: _Envelope) -> None:
    b = e.b
    try:
        h = read_head(b, 0)
    except Malformed as err:
        raise _bad_frame(0, f"frame is not MessagePack: {err}") from None
    if h.kind != MAP:
        raise _bad_frame(0, "frame is not a map")
    if h.v * 2 > len(b) - h.off:
        raise _bad_frame(0, "map claims more entries than the frame holds")
    i = h.off
    for _ in range(h.v):
        try:
            kh = read_head(b, i)
            vat = kh.end()
            if kh.kind != STR:
                vat, _deep = skip(b, i, 0)
                if e.early is None:
                    e.early = ("", i, "envelope key is not a string")
        except Malformed as err:
            raise _bad_frame(i, f"bad key: {err}") from None
        key = b[kh.off:kh.end()] if kh.kind == STR else None
        try:
            end, deep = skip(b, vat, 0)
        except Malformed as err:
            raise _bad_frame(vat, f"bad value for key {_escape(key or b'')!r}: {err}") from None
        if deep and e.early is None:
            e.early = ("/" + _escape(key or b""), vat, f"value nests deeper than {MAX_DEPTH}")
        name = _utf8(key) if key is not None else None
        if name is not None and name in _FIELDS:
            if name in e.fields:
                if e.early is None:
                    e.early = ("/" + name, i, "duplicate key")
            else:
                e.fields[name] = (vat, end)
        i = end
    if i != len(b):
        raise _bad_frame(i, f"{len(b) - i} bytes after the map")


def _classify(e: _Envelope) -> None:
    t = e.head("t")
    if t is not None and t.kind == STR:
        e.typ = _utf8(e.b[t.off:t.end()]) or ""
    i = e.head("id")
    if i is not None and i.kind == UINT:
        e.id = i.v
    if t is None:
        raise e.fault('missing "t"')
    if not e.typ:
        raise e.fail_at("t", "", '"t" is not a non-empty UTF-8 string')


def _welcome(e: _Envelope) -> Welcome:
    v = e.uint("v")
    h = e.require("servers")
    if h.kind != ARRAY:
        raise e.fail_at("servers", "", "want an array")
    servers = []
    i = h.off
    for k in range(h.v):
        servers.append(e.str_at(i, "servers", f"/{k}"))
        i, _ = skip(e.b, i, 1)
    return Welcome(v, tuple(servers))


def _result(e: _Envelope) -> ResultMsg:
    id = e.uint("id")
    is_error = e.boolean("is_error")
    content = _blocks(e)
    structured: object = None
    if e.present("structured"):
        try:
            structured = unpack(e.raw("structured"))
        except (ValueError, TypeError) as err:
            raise e.fail_at("structured", "", f"cannot decode: {err}") from None
    truncated = e.boolean("truncated") if e.present("truncated") else False
    return ResultMsg(id, Result(is_error, tuple(content), structured, truncated))


_BLOCK_KEYS = frozenset(("type", "text", "kind", "mime", "uri", "name", "data", "size"))


def _blocks(e: _Envelope) -> list[Block]:
    b = e.b
    h = e.require("content")
    if h.kind != ARRAY:
        raise e.fail_at("content", "", "want an array")
    out = []
    i = h.off
    for k in range(h.v):
        sub = f"/{k}"
        bh = read_head(b, i)
        if bh.kind != MAP:
            raise e.fail_at("content", sub, "want a map")
        got: dict[str, str] = {}
        data: Optional[bytes] = None
        size: Optional[int] = None
        seen: set[str] = set()
        j = bh.off
        for _ in range(bh.v):
            kh = read_head(b, j)
            if kh.kind != STR:
                raise e.fail_at("content", sub, "block key is not a string")
            vat = kh.end()
            name = _utf8(b[kh.off:vat])
            if name is not None and name in _BLOCK_KEYS:
                at = f"{sub}/{name}"
                if name in seen:
                    raise e.fail_at("content", at, "duplicate key")
                seen.add(name)
                if name == "data":
                    vh = read_head(b, vat)
                    if vh.kind != BIN:
                        raise e.fail_at("content", at, "want binary data")
                    data = bytes(b[vh.off:vh.end()])
                elif name == "size":
                    vh = read_head(b, vat)
                    if vh.kind != UINT:
                        raise e.fail_at("content", at, "want an unsigned integer")
                    size = vh.v
                else:
                    got[name] = e.str_at(vat, "content", at)
            j, _ = skip(b, vat, 2)
        typ = got.get("type", "")
        if not typ:
            raise e.fail_at("content", sub, 'block has no "type"')
        if typ == TEXT:
            if "text" not in got:
                raise e.fail_at("content", sub, 'text block has no "text"')
            out.append(Block(TEXT, kind=TEXT, text=got["text"]))
        elif typ == OTHER:
            if not got.get("kind"):
                raise e.fail_at("content", sub, 'other block has no "kind"')
            out.append(Block(OTHER, kind=got["kind"], text=got.get("text"), mime=got.get("mime"), data=data,
                             size=size, uri=got.get("uri"), name=got.get("name")))
        else:
            out.append(Block(typ))  # from a newer capbridge: kept by its type alone
        i = j
    return out


def _denied(e: _Envelope) -> DeniedMsg:
    id = e.uint("id") if e.present("id") else None
    code = e.non_empty("code")
    message = e.opt_str("message")
    path = e.opt_str("path")
    rpc_code = None
    if e.present("rpc_code"):
        h = e.require("rpc_code")
        if h.kind not in (UINT, NEGINT):
            raise e.fail_at("rpc_code", "", "want an integer")
        rpc_code = h.v
    quota = e.opt_str("quota")
    retry_ms = e.uint("retry_ms") if e.present("retry_ms") else None
    return DeniedMsg(id, code, message, path, rpc_code, quota, retry_ms)
