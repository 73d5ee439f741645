"""decode_structured against the shapes a façade writes: a fit returns the
value, a misfit is a DecodeError that says where, what was wanted and what
was there."""

from __future__ import annotations

import unittest
from typing import Any, Optional

import capwire
from capwire import DecodeError, Result

SHAPES: capwire.Shapes = {
    "Weather": ["record", [["current", "Current"]], [["history", ["list", "Day"]], ["note", ["nullable", "string"]]]],
    "Current": ["record", [["temp", "number"]], [["conditions", "Conditions"], ["a/b~c", "integer"]]],
    "Conditions": ["enum", ["sun", "rain"]],
    "Day": ["record", [], [["day", "string"], ["temp", "number"]]],
    "Node": ["record", [["value", "string"]], [["children", ["list", "Node"]]]],
    "Color": ["union", ["string", ["list", "integer"]]],
}


def decode(structured: Any, shape: capwire.Shape = "Weather", shapes: Optional[capwire.Shapes] = None) -> Any:
    return capwire.decode_structured(Result(is_error=False, content=(), structured=structured), shape,
                                     SHAPES if shapes is None else shapes)


class ShapeTest(unittest.TestCase):
    def misfit(self, v: Any, shape: capwire.Shape = "Weather") -> DecodeError:
        with self.assertRaises(DecodeError) as cm:
            decode(v, shape)
        return cm.exception

    def test_a_value_that_fits_is_returned_as_it_is(self) -> None:
        v = {"current": {"temp": 21, "conditions": "sun", "extra": [1]}, "history": [{"day": "mon"}], "note": None, "more": True}
        self.assertIs(decode(v), v)
        self.assertEqual(decode({"value": "a", "children": [{"value": "b", "children": []}]}, "Node")["value"], "a")
        self.assertEqual(decode("red", "Color"), "red")
        self.assertEqual(decode([1, 2], "Color"), [1, 2])
        self.assertEqual(decode({"any": [None]}, "any"), {"any": [None]})

    def test_a_misfit_names_its_place_the_type_wanted_and_what_is_there(self) -> None:
        cases: list[tuple[Any, capwire.Shape, str, str, str]] = [
            ([1], "Weather", "", "Weather", "array"),
            ({}, "Weather", "/current", "Current", "nothing (a required key is missing)"),
            ({"current": {"temp": "warm"}}, "Weather", "/current/temp", "number", "string"),
            ({"current": {"temp": 1, "conditions": "snow"}}, "Weather", "/current/conditions", "Conditions", "string"),
            ({"current": {"temp": 1, "a/b~c": 1.5}}, "Weather", "/current/a~1b~0c", "integer", "number 1.5"),
            ({"current": {"temp": 1}, "history": [{"day": "mon"}, {"day": 2}]}, "Weather", "/history/1/day", "string", "integer 2"),
            ({"current": {"temp": 1}, "history": None}, "Weather", "/history", "list of Day", "None"),
            ({"current": {"temp": True}}, "Weather", "/current/temp", "number", "boolean"),
            ({"value": "a", "children": [{"value": 1}]}, "Node", "/children/0/value", "string", "integer 1"),
            ([1, "2"], "Color", "", "Color", "array"),
            (b"\x01", ["map", "any"], "", "map of any", "binary"),
        ]
        for v, shape, path, want, got in cases:
            with self.subTest(v=v):
                e = self.misfit(v, shape)
                self.assertEqual((e.path, e.want, e.got), (path, want, got))

    def test_no_structured_content_is_a_decode_error_at_the_root(self) -> None:
        e = self.misfit(None)
        self.assertEqual((e.path, e.want), ("", "Weather"))

    def test_nesting_and_unions_are_bounded(self) -> None:
        deep: Any = {"value": "x"}
        for _ in range(200):
            deep = {"value": "x", "children": [deep]}
        self.assertEqual(self.misfit(deep, "Node").got, "a value nested too deep")
        # Each level a union of two records that both look deep: without a
        # bound the check doubles per level.
        wide: capwire.Shapes = {"U": ["union", [["record", [["n", "U"]], []], ["record", [["n", "U"]], [["x", "string"]]]]]}
        v: Any = 1
        for _ in range(30):
            v = {"n": v}
        with self.assertRaises(DecodeError) as cm:
            decode(v, "U", wide)
        self.assertEqual((cm.exception.path, cm.exception.got), ("", "a value too costly to check"))

    def test_a_shape_naming_no_type_is_the_facades_fault(self) -> None:
        with self.assertRaises(TypeError):
            decode({}, "Missing")
