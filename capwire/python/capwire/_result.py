"""Results (docs/capwire.md, "Results and content blocks"), under the
spec's names."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

TEXT = "text"
OTHER = "other"


@dataclass(frozen=True)
class Block:
    """One content block. type is "text" (text holds it) or "other" (kind
    names the MCP block type that did not cross the wire: "image",
    "audio", "resource_link", "resource", ...); a block type from a newer
    capbridge keeps only its type."""
    type: str
    text: Optional[str] = None
    kind: Optional[str] = None


@dataclass(frozen=True)
class Result:
    """What a tool returned. A tool that ran and failed is a Result with
    is_error set, not an exception: the server's own words are in content.
    structured is the tool's structuredContent decoded from MessagePack
    (maps are dicts, binary data bytes), None when it gave none."""
    is_error: bool
    content: tuple[Block, ...]
    structured: Any = None
    truncated: bool = False

    def text(self) -> str:
        """The text blocks joined with "\\n"."""
        return "\n".join(b.text for b in self.content if b.type == TEXT and b.text is not None)
