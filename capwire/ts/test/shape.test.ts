// decodeStructured against the shapes a façade writes: a fit returns the
// value, a misfit is a DecodeError that says where, what was wanted and
// what was there.

import assert from "node:assert/strict";
import { test } from "node:test";

import { DecodeError, Result, decodeStructured, type Shape, type Shapes } from "../src/index.js";

const shapes: Shapes = {
  Weather: ["record", [["current", "Current"]], [["history", ["list", "Day"]], ["note", ["nullable", "string"]]]],
  Current: ["record", [["temp", "number"]], [["conditions", "Conditions"], ["a/b~c", "integer"]]],
  Conditions: ["enum", ["sun", "rain"]],
  Day: ["record", [], [["day", "string"], ["temp", "number"]]],
  Node: ["record", [["value", "string"]], [["children", ["list", "Node"]]]],
  Color: ["union", ["string", ["list", "integer"]]],
};

const decode = (structured: unknown, shape: Shape = "Weather") =>
  decodeStructured<unknown>(new Result({ isError: false, content: [], structured }), shape, shapes);

function misfit(structured: unknown, shape?: Shape): DecodeError {
  try {
    decode(structured, shape);
  } catch (e) {
    assert.ok(e instanceof DecodeError, `want a DecodeError, got ${String(e)}`);
    return e;
  }
  assert.fail("no error");
}

test("a value that fits is returned as it is, extra keys and all", () => {
  const v = { current: { temp: 21.5, conditions: "sun", extra: [1] }, history: [{ day: "mon" }], note: null, more: true };
  assert.equal(decode(v), v);
  assert.deepEqual(decode({ value: "a", children: [{ value: "b", children: [] }] }, "Node"), { value: "a", children: [{ value: "b", children: [] }] });
  assert.equal(decode("red", "Color"), "red");
  assert.deepEqual(decode([1, 2, 3], "Color"), [1, 2, 3]);
  assert.deepEqual(decode({ x: 1n }, ["map", "integer"]), { x: 1n });
  assert.deepEqual(decode({ any: [null] }, "any"), { any: [null] });
});

test("a misfit names its place, the type wanted and what is there", () => {
  const cases: Array<[unknown, Shape | undefined, string, string, string]> = [
    [[1], undefined, "", "Weather", "array"],
    [{}, undefined, "/current", "Current", "nothing (a required key is missing)"],
    [{ current: { temp: "warm" } }, undefined, "/current/temp", "number", "string"],
    [{ current: { temp: 1, conditions: "snow" } }, undefined, "/current/conditions", "Conditions", "string"],
    [{ current: { temp: 1, "a/b~c": 1.5 } }, undefined, "/current/a~1b~0c", "integer", "number 1.5"],
    [{ current: { temp: 1 }, history: [{ day: "mon" }, { day: 2 }] }, undefined, "/history/1/day", "string", "integer 2"],
    [{ current: { temp: 1 }, history: null }, undefined, "/history", "list of Day", "null"],
    [{ current: { temp: 1 }, note: 3 }, undefined, "/note", "string", "integer 3"],
    [{ value: "a", children: [{ value: 1 }] }, "Node", "/children/0/value", "string", "integer 1"],
    [[1, "2"], "Color", "", "Color", "array"],
    [new Uint8Array([1]), ["map", "any"], "", "map of any", "binary"],
    [true, "integer", "", "integer", "boolean"],
  ];
  for (const [v, shape, path, want, got] of cases) {
    const e = misfit(v, shape);
    assert.deepEqual([e.path, e.want, e.got], [path, want, got], JSON.stringify(v));
  }
});

test("no structured content is a DecodeError at the root", () => {
  const e = misfit(undefined);
  assert.deepEqual([e.path, e.want], ["", "Weather"]);
});

test("nesting and unions are bounded", () => {
  let deep: unknown = { value: "x" };
  for (let i = 0; i < 200; i++) deep = { value: "x", children: [deep] };
  assert.equal(misfit(deep, "Node").got, "a value nested too deep");
  // Each level a union of two records that both look deep: without a
  // bound the check doubles per level.
  const wide: Shapes = { U: ["union", [["record", [["n", "U"]], []], ["record", [["n", "U"]], [["x", "string"]]]]] };
  let v: unknown = 1;
  for (let i = 0; i < 30; i++) v = { n: v };
  assert.throws(
    () => decodeStructured(new Result({ isError: false, content: [], structured: v }), "U", wide),
    (e) => e instanceof DecodeError && e.path === "" && e.got === "a value too costly to check",
  );
});

test("a shape naming no type is the façade's fault, not the content's", () => {
  assert.throws(() => decode({}, "Missing"), (e) => e instanceof TypeError && !(e instanceof DecodeError));
});
