"""The MessagePack of wire v1, with no third-party code: headers, a bounded
skip (the Go reader's refusals: counts larger than the bytes left, 0xc1,
nesting over 128), a decoder for what skip has checked, and a
shortest-form encoder, which the spec's worked example depends on."""

from __future__ import annotations

import struct
from typing import Any, NamedTuple

#: The deepest nesting any capbridge decoder accepts (docs/capwire.md, "Envelopes").
MAX_DEPTH = 128

NIL, FALSE, TRUE, UINT, NEGINT, FLOAT32, FLOAT64, STR, BIN, EXT, ARRAY, MAP = range(1, 13)


class Malformed(Exception):
    """A structural fault: the bytes are not MessagePack."""

    def __init__(self, short: bool) -> None:
        super().__init__("value runs past the end of the frame" if short
                         else "byte 0xc1 is never used in MessagePack")


class ExtType(NamedTuple):
    """An extension value, kept as its type number and bytes."""
    code: int
    data: bytes


class Head(NamedTuple):
    """The header of one value. v is the integer value (UINT, NEGINT), the
    payload length (STR, BIN; EXT counts its type byte too) or the element
    count (ARRAY; MAP counts pairs). off is where the payload or first
    element starts; for other kinds, where the next value starts."""
    kind: int
    v: int
    off: int

    def end(self) -> int:
        """The offset past the value (not for ARRAY or MAP, whose elements follow)."""
        return self.off + self.v if self.kind in (STR, BIN, EXT) else self.off


def _be(b: bytes, i: int, w: int) -> int:
    if w > len(b) - i - 1:
        raise Malformed(True)
    return int.from_bytes(b[i + 1:i + 1 + w], "big")


def _payload(b: bytes, kind: int, n: int, off: int) -> Head:
    if off > len(b) or n > len(b) - off:
        raise Malformed(True)
    return Head(kind, n, off)


def read_head(b: bytes, i: int) -> Head:
    """Decodes the header at b[i]; never reads past the end of b."""
    if i < 0 or i >= len(b):
        raise Malformed(True)
    c = b[i]
    if c <= 0x7f:
        return Head(UINT, c, i + 1)
    if c >= 0xe0:
        return Head(NEGINT, c - 256, i + 1)
    if c <= 0x8f:
        return Head(MAP, c & 0x0f, i + 1)
    if c <= 0x9f:
        return Head(ARRAY, c & 0x0f, i + 1)
    if c <= 0xbf:
        return _payload(b, STR, c & 0x1f, i + 1)
    if c == 0xc0:
        return Head(NIL, 0, i + 1)
    if c == 0xc2:
        return Head(FALSE, 0, i + 1)
    if c == 0xc3:
        return Head(TRUE, 0, i + 1)
    if 0xc4 <= c <= 0xc6:
        w = 1 << (c - 0xc4)
        return _payload(b, BIN, _be(b, i, w), i + 1 + w)
    if 0xd9 <= c <= 0xdb:
        w = 1 << (c - 0xd9)
        return _payload(b, STR, _be(b, i, w), i + 1 + w)
    if 0xc7 <= c <= 0xc9:
        w = 1 << (c - 0xc7)
        return _payload(b, EXT, _be(b, i, w) + 1, i + 1 + w)
    if c == 0xca:
        _be(b, i, 4)
        return Head(FLOAT32, 0, i + 5)
    if c == 0xcb:
        _be(b, i, 8)
        return Head(FLOAT64, 0, i + 9)
    if 0xcc <= c <= 0xcf:
        w = 1 << (c - 0xcc)
        return Head(UINT, _be(b, i, w), i + 1 + w)
    if 0xd0 <= c <= 0xd3:
        # A signed format holding a non-negative value is a UINT: some
        # encoders write small numbers that way.
        w = 1 << (c - 0xd0)
        v = _be(b, i, w)
        if v >= 1 << (8 * w - 1):
            return Head(NEGINT, v - (1 << (8 * w)), i + 1 + w)
        return Head(UINT, v, i + 1 + w)
    if 0xd4 <= c <= 0xd8:
        return _payload(b, EXT, 1 + (1 << (c - 0xd4)), i + 1)
    if c in (0xdc, 0xdd):
        w = 2 << (c - 0xdc)
        return Head(ARRAY, _be(b, i, w), i + 1 + w)
    if c in (0xde, 0xdf):
        w = 2 << (c - 0xde)
        return Head(MAP, _be(b, i, w), i + 1 + w)
    raise Malformed(False)  # 0xc1


def skip(b: bytes, i: int, depth: int) -> tuple[int, bool]:
    """Returns the end of the value at b[i], checking that it is well
    formed, and whether it nests deeper than MAX_DEPTH; depth is the number
    of containers already open around it. A container opened at depth
    MAX_DEPTH is walked flat to its end, so recursion stays within
    MAX_DEPTH and every count is checked against the bytes left before it
    is looped over: the work is bounded by len(b)."""
    h = read_head(b, i)
    if h.kind not in (ARRAY, MAP):
        return h.end(), False
    if depth >= MAX_DEPTH:
        return _skip_flat(b, i), True
    n = 2 * h.v if h.kind == MAP else h.v
    # Every element takes at least one byte: a larger count is a lie.
    if n > len(b) - h.off:
        raise Malformed(True)
    j, deep = h.off, False
    for _ in range(n):
        j, d = skip(b, j, depth + 1)
        deep = deep or d
    return j, deep


def _skip_flat(b: bytes, i: int) -> int:
    pending = 1
    while pending > 0:
        h = read_head(b, i)
        if h.kind == ARRAY:
            pending += h.v
        elif h.kind == MAP:
            pending += 2 * h.v
        i = h.end()
        pending -= 1
        if pending > len(b) - i:
            raise Malformed(True)
    return i


def check(raw: bytes) -> str:
    """Describes the fault of raw as one value no deeper than MAX_DEPTH, or
    returns "" when it is sound."""
    try:
        end, deep = skip(raw, 0, 0)
    except Malformed as e:
        return str(e)
    if deep:
        return f"nesting deeper than {MAX_DEPTH}"
    if end != len(raw):
        return "bytes after the value"
    return ""


Value = Any


def unpack(b: bytes) -> Value:
    """Decodes one value that check has found sound: maps become dicts
    (a key that cannot be a dict key, an array or map, is a ValueError),
    strings str (invalid UTF-8 is a ValueError), binary data bytes,
    extensions ExtType."""
    v, _ = _unpack(b, 0)
    return v


def _unpack(b: bytes, i: int) -> tuple[Value, int]:
    h = read_head(b, i)
    k = h.kind
    if k == NIL:
        return None, h.off
    if k in (FALSE, TRUE):
        return k == TRUE, h.off
    if k in (UINT, NEGINT):
        return h.v, h.off
    if k == FLOAT32:
        return struct.unpack(">f", b[i + 1:i + 5])[0], h.off
    if k == FLOAT64:
        return struct.unpack(">d", b[i + 1:i + 9])[0], h.off
    if k == STR:
        return bytes(b[h.off:h.end()]).decode("utf-8"), h.end()
    if k == BIN:
        return bytes(b[h.off:h.end()]), h.end()
    if k == EXT:
        return ExtType(int.from_bytes(b[h.off:h.off + 1], "big", signed=True), bytes(b[h.off + 1:h.end()])), h.end()
    j = h.off
    if k == ARRAY:
        out: list[Value] = []
        for _ in range(h.v):
            x, j = _unpack(b, j)
            out.append(x)
        return out, j
    m: dict[Value, Value] = {}
    for _ in range(h.v):
        key, j = _unpack(b, j)
        if isinstance(key, (list, dict)):
            raise ValueError("a map key that is an array or a map")
        m[key], j = _unpack(b, j)
    return m, j


class Writer:
    """Appends values in their shortest MessagePack form."""

    def __init__(self) -> None:
        self.buf = bytearray()

    def string(self, s: str) -> None:
        p = s.encode("utf-8")  # a lone surrogate raises UnicodeEncodeError
        n = len(p)
        if n <= 31:
            self.buf.append(0xa0 | n)
        elif n <= 0xff:
            self.buf += bytes((0xd9, n))
        elif n <= 0xffff:
            self.buf += b"\xda" + n.to_bytes(2, "big")
        elif n <= 0xffffffff:
            self.buf += b"\xdb" + n.to_bytes(4, "big")
        else:
            raise ValueError("string longer than MessagePack allows")
        self.buf += p

    def uint(self, v: int) -> None:
        if v <= 0x7f:
            self.buf.append(v)
        elif v <= 0xff:
            self.buf += bytes((0xcc, v))
        elif v <= 0xffff:
            self.buf += b"\xcd" + v.to_bytes(2, "big")
        elif v <= 0xffffffff:
            self.buf += b"\xce" + v.to_bytes(4, "big")
        elif v <= 0xffffffffffffffff:
            self.buf += b"\xcf" + v.to_bytes(8, "big")
        else:
            raise OverflowError("integer above 2**64-1")

    def sint(self, v: int) -> None:
        if v >= 0:
            self.uint(v)
        elif v >= -32:
            self.buf.append(v & 0xff)
        elif v >= -(1 << 7):
            self.buf += b"\xd0" + v.to_bytes(1, "big", signed=True)
        elif v >= -(1 << 15):
            self.buf += b"\xd1" + v.to_bytes(2, "big", signed=True)
        elif v >= -(1 << 31):
            self.buf += b"\xd2" + v.to_bytes(4, "big", signed=True)
        elif v >= -(1 << 63):
            self.buf += b"\xd3" + v.to_bytes(8, "big", signed=True)
        else:
            raise OverflowError("integer below -2**63")

    def header(self, fix: int, w16: int, n: int) -> None:
        """A map (fix 0x80, w16 0xde) or array (0x90, 0xdc) header."""
        if n <= 15:
            self.buf.append(fix | n)
        elif n <= 0xffff:
            self.buf += bytes((w16,)) + n.to_bytes(2, "big")
        else:
            self.buf += bytes((w16 + 1,)) + n.to_bytes(4, "big")

    def bin(self, p: bytes) -> None:
        n = len(p)
        if n <= 0xff:
            self.buf += bytes((0xc4, n))
        elif n <= 0xffff:
            self.buf += b"\xc5" + n.to_bytes(2, "big")
        elif n <= 0xffffffff:
            self.buf += b"\xc6" + n.to_bytes(4, "big")
        else:
            raise ValueError("binary data longer than MessagePack allows")
        self.buf += p

    def value(self, x: object, path: str = "", depth: int = 0) -> None:
        """Appends x: None, bool, int, float, str, bytes-like (binary data),
        list or tuple (array), dict with str keys (map). Anything else, or
        nesting over MAX_DEPTH (which also catches cycles), is a TypeError
        naming where it is."""
        if x is None:
            self.buf.append(0xc0)
        elif x is True or x is False:
            self.buf.append(0xc3 if x else 0xc2)
        elif isinstance(x, int):
            self.sint(x)
        elif isinstance(x, float):
            self.buf += b"\xcb" + struct.pack(">d", x)
        elif isinstance(x, str):
            self.string(x)
        elif isinstance(x, (bytes, bytearray, memoryview)):
            self.bin(bytes(x))
        elif isinstance(x, (list, tuple, dict)):
            if depth >= MAX_DEPTH:
                raise TypeError(f"capwire: encoding args at {path!r}: nesting deeper than {MAX_DEPTH}")
            if isinstance(x, dict):
                self.header(0x80, 0xde, len(x))
                for k, v in x.items():
                    if not isinstance(k, str):
                        raise TypeError(f"capwire: encoding args at {path!r}: map key {k!r} is not a str")
                    self.string(k)
                    self.value(v, path + "/" + k.replace("~", "~0").replace("/", "~1"), depth + 1)
            else:
                self.header(0x90, 0xdc, len(x))
                for n, v in enumerate(x):
                    self.value(v, f"{path}/{n}", depth + 1)
        else:
            raise TypeError(f"capwire: encoding args at {path!r}: cannot send a {type(x).__name__}")
