"""The codec's refusals, the same the Go codec makes: hostile bytes give a
WireError saying whether the connection can go on, never anything else."""

from __future__ import annotations

import unittest
from typing import Any, Optional

import capwire
from capwire import WireError
from capwire._msgpack import ExtType, Writer, unpack


def pack(x: Any) -> bytes:
    w = Writer()
    w.value(x)
    return bytes(w.buf)


def result(**extra: Any) -> bytes:
    m: dict[str, Any] = {"t": "result", "id": 7, "is_error": False, "content": [{"type": "text", "text": "hi"}]}
    m.update(extra)
    return pack(m)


def nested(n: int) -> bytes:
    return b"\x91" * n + b"\x00"


class CodecTest(unittest.TestCase):
    def wire_error(self, p: bytes) -> WireError:
        with self.assertRaises(WireError) as cm:
            capwire.decode(p)
        return cm.exception

    def test_broken_payloads_are_fatal_bad_frame(self) -> None:
        cases = {
            "not a map": pack([1, 2]),
            "0xc1": b"\xc1",
            "empty": b"",
            "trailing bytes": pack({"t": "fatal", "code": "bad_token"}) + b"\xc0",
            "count beyond the bytes": b"\xdf\xff\xff\xff\xff\xa1t",
            "string past the end": b"\x81\xa1t\xdb\xff\xff\xff\xffa",
            "array count beyond the bytes": b"\x81\xa1t\xdd\x7f\xff\xff\xff",
            "truncated float": b"\x81\xa1t\xcb\x00",
        }
        for name, p in cases.items():
            with self.subTest(name):
                e = self.wire_error(p)
                self.assertEqual(e.code, "bad_frame")
                self.assertTrue(e.fatal)

    def test_malformed_envelopes_are_bad_request_with_the_id(self) -> None:
        dup = b"\x85" + pack("t") + pack("result") + pack("is_error") + pack(False) + pack("is_error") + pack(True) \
            + pack("content") + pack([]) + pack("id") + pack(9)
        non_str_key = b"\x83" + pack("t") + pack("denied") + pack(1) + pack(2) + pack("id") + pack(4)
        bad_utf8 = b"\x84" + pack("t") + pack("result") + pack("id") + pack(7) + pack("is_error") + pack(False) \
            + pack("content") + b"\x91\x82" + pack("type") + pack("text") + pack("text") + b"\xa1\xff"
        cases: list[tuple[str, bytes, str, Optional[int]]] = [
            ("duplicate key", dup, "/is_error", 9),
            ("non-string key", non_str_key, "", 4),
            ("missing t", pack({"id": 3}), "", 3),
            ("unknown t", pack({"t": "gossip", "id": 3}), "/t", 3),
            ("wrong type", result(is_error="no"), "/is_error", 7),
            ("invalid UTF-8 text", bad_utf8, "/content/0/text", 7),
            ("block without type", result(content=[{"text": "x"}]), "/content/0", 7),
            ("text block without text", result(content=[{"type": "text"}]), "/content/0", 7),
            ("other block without kind", result(content=[{"type": "other"}]), "/content/0", 7),
            ("block data a string", result(content=[{"type": "other", "kind": "image", "data": "iVBOR"}]),
             "/content/0/data", 7),
            ("block size negative", result(content=[{"type": "other", "kind": "image", "size": -1}]),
             "/content/0/size", 7),
            ("denied without code", pack({"t": "denied", "id": 5}), "", 5),
            ("negative id", pack({"t": "result", "id": -1, "is_error": False, "content": []}), "/id", None),
        ]
        for name, p, path, id in cases:
            with self.subTest(name):
                e = self.wire_error(p)
                self.assertEqual(e.code, "bad_request")
                self.assertFalse(e.fatal)
                self.assertEqual(e.path, path)
                self.assertEqual(e.id, id)
                self.assertTrue(capwire.has_code(e, "bad_request"))

    def test_nesting_bound(self) -> None:
        def at(n: int) -> bytes:
            return b"\x85" + pack("t") + pack("result") + pack("id") + pack(2) + pack("is_error") + pack(False) \
                + pack("content") + b"\x90" + pack("structured") + nested(n)
        m = capwire.decode(at(128))
        self.assertIsInstance(m, capwire._envelope.ResultMsg)
        e = self.wire_error(at(129))
        self.assertEqual((e.code, e.path, e.id), ("bad_request", "/structured", 2))
        # Far deeper than any stack: walked flat, bounded by the bytes.
        self.assertEqual(self.wire_error(at(1_000_000)).code, "bad_request")

    def test_unknown_keys_and_block_types(self) -> None:
        m = capwire.decode(result(extra={"any": [1, 2]}, content=[{"type": "hologram", "depth": 3}], truncated=None))
        assert isinstance(m, capwire._envelope.ResultMsg)
        self.assertEqual(m.result.content, (capwire.Block("hologram"),))
        self.assertFalse(m.result.truncated)
        self.assertIsNone(m.result.structured)

    def test_signed_formats_and_rpc_code(self) -> None:
        p = b"\x85" + pack("t") + pack("denied") + pack("id") + b"\xd0\x05" + pack("code") + pack("server_error") \
            + pack("message") + pack("boom") + pack("rpc_code") + pack(-32603)
        self.assertEqual(capwire.decode(p), capwire._envelope.DeniedMsg(5, "server_error", "boom", "", -32603))

    def test_structured_values(self) -> None:
        m = capwire.decode(result(structured={"b": b"\x01", "f": 1.5, "n": -(2**63), "u": 2**64 - 1, "l": [None, True]}))
        assert isinstance(m, capwire._envelope.ResultMsg)
        self.assertEqual(m.result.structured, {"b": b"\x01", "f": 1.5, "n": -(2**63), "u": 2**64 - 1, "l": [None, True]})
        self.assertEqual(unpack(b"\xd4\x05\x09"), ExtType(5, b"\x09"))
        e = self.wire_error(result(structured=None) [:-1] + b"\x81\x90\x00")  # a map keyed by an array
        self.assertEqual(e.path, "/structured")

    def test_encode_args(self) -> None:
        self.assertEqual(capwire.encode_args(None), b"\x80")
        self.assertEqual(capwire.encode_args({"b": b"\x01"}), b"\x81\xa1b\xc4\x01\x01")
        self.assertEqual(capwire.encode_args({"n": -1, "u": 2**64 - 1}), b"\x82\xa1n\xff\xa1u\xcf" + b"\xff" * 8)
        for bad in ([1], "x", 3, b"\x80"):
            with self.assertRaises(TypeError):
                capwire.encode_args(bad)
        with self.assertRaisesRegex(TypeError, "args at '/s': cannot send a set"):
            capwire.encode_args({"s": {1}})
        with self.assertRaisesRegex(TypeError, "is not a str"):
            capwire.encode_args({"m": {1: 2}})
        with self.assertRaises(OverflowError):
            capwire.encode_args({"big": 2**64})
        with self.assertRaises(UnicodeEncodeError):
            capwire.encode_args({"s": "\ud800"})
        deep: Any = 0
        for _ in range(127):
            deep = [deep]
        capwire.encode_args({"deep": deep})
        with self.assertRaisesRegex(TypeError, "deeper than 128"):
            capwire.encode_args({"deep": [deep]})
        cyclic: dict[str, Any] = {}
        cyclic["self"] = cyclic
        with self.assertRaisesRegex(TypeError, "deeper than 128"):
            capwire.encode_args(cyclic)


if __name__ == "__main__":
    unittest.main()
