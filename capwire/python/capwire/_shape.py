"""Checked decoding of structured content: what Go's Result.Decode is to a
Go type, decode_structured is to a façade's output type. A generated
façade describes its output types as shapes, data the generator writes
from the same type plan as the declarations, and its decode helpers hand
them here; the checking code lives once, in this package.

A shape is:

- "string", "integer", "number", "boolean", or "any" (any value);
- any other string: the type of that name in the façade's shapes;
- ["list", T], ["map", T] (a dict whose every value is a T),
  ["nullable", T] (None or a T);
- ["record", required, optional], each a list of [key, T]: a dict with
  the required keys, each holding its type, and the optional keys holding
  theirs when present; other keys are allowed, as a newer server may add
  them;
- ["enum", values]: one of the values;
- ["union", variants]: a value of at least one of the variants.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Mapping, Optional, Union

from ._errors import CapwireError
from ._result import Result

Shape = Union[str, list[Any]]
Shapes = Mapping[str, Shape]

# Values nest no deeper (as in Go), and the steps spent on union variants
# that did not fit are capped, so a check costs at most a walk of the value
# plus this much backtracking.
_MAX_DEPTH = 128
_MAX_WASTED = 1 << 18

# A misfit: path, want, got. It becomes a DecodeError only when it is the
# answer: unions discard many.
_Misfit = tuple[str, str, str]


class DecodeError(CapwireError):
    """Structured content that does not fit the type a decode helper was
    given. path is an RFC 6901 pointer into the content ("" for the whole
    value), want the type expected there, got what the content holds."""

    def __init__(self, path: str, want: str, got: str) -> None:
        super().__init__(f"capwire: structured content at {json.dumps(path)}: want {want}, got {got}")
        self.path = path
        self.want = want
        self.got = got


def decode_structured(r: Result, shape: Shape, shapes: Shapes) -> Any:
    """Returns r.structured once it fits shape, whose names are in shapes;
    otherwise raises a DecodeError naming the first place that does not
    fit. A result with no structured content is a DecodeError at ""."""
    if r.structured is None:
        raise DecodeError("", _describe(shape), "no structured content")
    m = _Checker(shapes).check(r.structured, shape, "", 0)
    if m is not None:
        raise DecodeError(*m)
    return r.structured


_PRIMITIVES: dict[str, Callable[[object], bool]] = {
    "any": lambda v: True,
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
}


def _describe(s: Shape) -> str:
    if isinstance(s, str):
        return s
    if s[0] == "list":
        return "list of " + _describe(s[1])
    if s[0] == "map":
        return "map of " + _describe(s[1])
    if s[0] == "nullable":
        return _describe(s[1]) + " or None"
    return str(s[0])


def _kind(v: object) -> str:
    if v is None:
        return "None"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return f"integer {v}"
    if isinstance(v, float):
        return f"number {v}"
    if isinstance(v, str):
        return "string"
    if isinstance(v, (bytes, bytearray)):
        return "binary"
    if isinstance(v, (list, tuple)):
        return "array"
    if isinstance(v, dict):
        return "object"
    return type(v).__name__


def _pointer(path: str, key: object) -> str:
    """RFC 6901: "~" is "~0", "/" is "~1"."""
    return path + "/" + str(key).replace("~", "~0").replace("/", "~1")


class _Checker:
    def __init__(self, shapes: Shapes) -> None:
        self.shapes = shapes
        self.steps = 0
        self.wasted = 0

    def check(self, v: object, s: Shape, path: str, depth: int) -> Optional[_Misfit]:
        """Returns the first misfit of v to s, or None when v fits."""
        self.steps += 1
        if depth > _MAX_DEPTH:
            return path, _describe(s), "a value nested too deep"
        if isinstance(s, str) and s in _PRIMITIVES:
            return None if _PRIMITIVES[s](v) else (path, s, _kind(v))
        miss = (path, _describe(s), _kind(v))
        if isinstance(s, str):
            if s not in self.shapes:
                raise TypeError(f"capwire: the façade's shapes name no type {json.dumps(s)}")
            named = self.shapes[s]
            m = self.check(v, named, path, depth + 1)
            # A named type's own misfit is reported under its name.
            return (path, s, m[2]) if m is not None and m[0] == path and m[1] == _describe(named) else m
        tag = s[0]
        if tag == "nullable":
            return None if v is None else self.check(v, s[1], path, depth + 1)
        if tag == "list":
            if not isinstance(v, list):
                return miss
            for i, x in enumerate(v):
                m = self.check(x, s[1], _pointer(path, i), depth + 1)
                if m is not None:
                    return m
            return None
        if tag == "map":
            if not isinstance(v, dict):
                return miss
            for k, x in v.items():
                m = self.check(x, s[1], _pointer(path, k), depth + 1)
                if m is not None:
                    return m
            return None
        if tag == "record":
            if not isinstance(v, dict):
                return miss
            required: list[list[Any]] = s[1]
            optional: list[list[Any]] = s[2]
            for k, fs in required:
                if k not in v:
                    return _pointer(path, k), _describe(fs), "nothing (a required key is missing)"
                m = self.check(v[k], fs, _pointer(path, k), depth + 1)
                if m is not None:
                    return m
            for k, fs in optional:
                if k in v:
                    m = self.check(v[k], fs, _pointer(path, k), depth + 1)
                    if m is not None:
                        return m
            return None
        if tag == "enum":
            ok = isinstance(v, (str, int, float)) and not isinstance(v, bool) and v in s[1]
            return None if ok else miss
        if tag == "union":
            for variant in s[1]:
                if self.wasted > _MAX_WASTED:
                    break
                before = self.steps
                if self.check(v, variant, path, depth + 1) is None:
                    return None
                self.wasted += self.steps - before
            return (path, _describe(s), "a value too costly to check") if self.wasted > _MAX_WASTED else miss
        raise TypeError(f"capwire: a façade's shape has no kind {json.dumps(str(tag))}")
