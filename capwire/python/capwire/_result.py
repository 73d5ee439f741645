"""Results (docs/capwire.md, "Results and content blocks"), under the
spec's names."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

TEXT = "text"
OTHER = "other"


@dataclass(frozen=True)
class Block:
    """One content block of a result. kind says what it is: "text" (text),
    an "image" or "audio" clip (data, mime), an embedded "resource" (uri,
    mime, and text or data) or a "resource_link" (uri, name, mime, size as
    the server declares them). Bytes cross only up to capbridge's limit for
    a result: beyond it data is None and size still says how many bytes
    there were (None: unknown). type is the wire's block type: "text",
    "other" for every other kind, or a newer type, kept by its type alone
    (kind is then "")."""
    type: str
    kind: str = ""
    text: Optional[str] = None
    mime: Optional[str] = None
    data: Optional[bytes] = None
    size: Optional[int] = None
    uri: Optional[str] = None
    name: Optional[str] = None


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
