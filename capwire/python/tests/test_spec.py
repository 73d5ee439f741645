"""The worked example in docs/capwire.md is what this client writes and
reads, byte for byte, and the spec's code tables are this package's."""

from __future__ import annotations

import os
import unittest
from pathlib import Path

import capwire
from capwire import Block, Result

# The Go test that runs these names the spec; run by hand from
# capwire/python, it is found relative to this file.
SPEC = Path(os.environ.get("CAPWIRE_SPEC", Path(__file__).resolve().parents[3] / "docs" / "capwire.md")).read_text("utf-8")


def spec_frames() -> dict[str, bytes]:
    """The spec's ```capwire-frame NAME blocks, "# ..." comments stripped."""
    out: dict[str, bytes] = {}
    name = None
    hexs = ""
    for line in SPEC.split("\n"):
        if line.startswith("```capwire-frame "):
            name, hexs = line[len("```capwire-frame "):], ""
        elif name is not None and line == "```":
            out[name] = bytes.fromhex(hexs)
            name = None
        elif name is not None:
            hexs += line.split("#", 1)[0].replace(" ", "")
    return out


class SpecTest(unittest.TestCase):
    def test_frames(self) -> None:
        self.assertEqual(sorted(spec_frames()), ["call", "result"])

    def test_call_encodes_byte_for_byte(self) -> None:
        args = capwire.encode_args({"title": "Crash on start", "labels": ["bug"]})
        got = capwire.encode_call(1, "mcp.github", "create_issue", args, 30000)
        self.assertEqual(got.hex(), spec_frames()["call"].hex())

    def test_result_decodes(self) -> None:
        frame = spec_frames()["result"]
        self.assertEqual(int.from_bytes(frame[:4], "big"), len(frame) - 4)
        m = capwire.decode(frame[4:])
        want = Result(is_error=False, content=(Block("text", kind="text", text="Created issue #42"), Block("other", kind="image")),
                      structured={"number": 42}, truncated=False)
        self.assertEqual(m, capwire._envelope.ResultMsg(1, want))
        self.assertEqual(want.text(), "Created issue #42")

    def test_code_tables(self) -> None:
        known = capwire.DENIAL_CODES | capwire.FATAL_CODES
        listed: set[str] = set()
        for line in SPEC.split("\n"):
            cells = line.strip().split("|")
            if len(cells) != 5 or not cells[1].strip().startswith("`"):
                continue
            code = cells[1].strip().strip("`")
            self.assertNotIn(code, listed)
            listed.add(code)
            self.assertIn(code, known)
            self.assertEqual(cells[3].strip().startswith("yes"), capwire.retryable(code), code)
        self.assertEqual(listed, set(known))
        self.assertTrue(all(capwire.is_fatal_code(c) for c in capwire.FATAL_CODES))
        self.assertFalse(any(capwire.is_denial_code(c) for c in capwire.FATAL_CODES))


if __name__ == "__main__":
    unittest.main()
