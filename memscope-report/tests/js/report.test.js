// Unit tests of the report's own JS helpers (assets/helpers.js) (node's built-in runner: `node --test`).
// Run by memscope-report/tests/assets.rs (`cargo test -p memscope-report`).
"use strict";
const test = require("node:test");
const assert = require("node:assert/strict");
const MS = require("../../assets/helpers.js");

test("bytes are printed in binary units with a sign", () => {
  assert.equal(MS.fmtBytes(0), "0 B");
  assert.equal(MS.fmtBytes(1023), "1023 B");
  assert.equal(MS.fmtBytes(4194304), "4.00 MiB");
  assert.equal(MS.fmtBytes(1073741824 + 67108864), "1.06 GiB");
  assert.equal(MS.fmtBytes(-2048), "−2.00 KiB");
  assert.equal(MS.fmtBytes(null), "—");
});

test("axis ticks drop trailing zeros", () => {
  assert.equal(MS.fmtAxisBytes(16 * 1048576), "16 MiB");
  assert.equal(MS.fmtAxisBytes(1.5 * 1073741824), "1.5 GiB");
  assert.equal(MS.fmtAxisBytes(0), "0 B");
  assert.equal(MS.fmtAxisBytes(1.25 * 1048576), "1.25 MiB");
});

test("times are printed from ns to s", () => {
  assert.equal(MS.fmtTime(999), "999 ns");
  assert.equal(MS.fmtTime(1500), "1.5 µs");
  assert.equal(MS.fmtTime(12_340_000), "12.34 ms");
  assert.equal(MS.fmtTime(2_500_000_000), "2.500 s");
});

test("rows sort by a field or a function, stably, empty values last in both directions", () => {
  const rows = [{ a: 2, n: "x" }, { a: null, n: "y" }, { a: 10, n: "z" }, { a: 2, n: "w" }];
  assert.deepEqual(MS.sortRows(rows, "a", 1).map((r) => r.n), ["x", "w", "z", "y"]);
  assert.deepEqual(MS.sortRows(rows, "a", -1).map((r) => r.n), ["z", "x", "w", "y"]);
  assert.deepEqual(MS.sortRows(rows, (r) => r.n, 1).map((r) => r.n), ["w", "x", "y", "z"]);
  // numbers compare as numbers, not text
  assert.deepEqual(MS.sortRows([{ a: 9 }, { a: 10 }], "a", 1).map((r) => r.a), [9, 10]);
});

test("series align on the union of times and hold their value until the next point", () => {
  const a = { t: [0, 10, 20], v: [1, 2, 3] };
  const b = { t: [5, 20], v: [7, 8] };
  const [xs, ya, yb] = MS.alignSeries([a, b]);
  assert.deepEqual(xs, [0, 5, 10, 20]);
  assert.deepEqual(ya, [1, 1, 2, 3]);
  assert.deepEqual(yb, [null, 7, 7, 8]);
});

test("a series with an end stops there", () => {
  const [xs, y] = MS.alignSeries([{ t: [0, 10], v: [4, 5], until: 15 }, { t: [0, 30], v: [1, 1] }]);
  assert.deepEqual(xs, [0, 10, 15, 30]);
  assert.deepEqual(y, [4, 5, 5, null]);
});

test("the icicle spans the zoomed node and lays children out in proportion", () => {
  const tree = { n: "all", v: 100, b: 3, c: [
    { n: "main", v: 75, b: 2, c: [{ n: "f", v: 50, b: 1 }, { n: "g", v: 25, b: 1 }] },
    { n: "(other)", v: 25, b: 1 }] };
  const r = MS.icicleLayout(tree, [], 400, 0.5);
  const by = (n) => r.find((q) => q.node.n === n);
  assert.equal(by("all").w, 400);
  assert.equal(by("main").w, 300);
  assert.equal(by("g").x, 200);
  assert.equal(by("g").d, 2);
  assert.deepEqual(by("g").path, [0, 1]);
  // zoomed on main: the root and main span the width, f takes two thirds
  const z = MS.icicleLayout(tree, [0], 300, 0.5);
  assert.equal(z.filter((q) => q.node.n === "main")[0].w, 300);
  assert.equal(z.find((q) => q.node.n === "f").w, 200);
  assert.equal(z.find((q) => q.node.n === "f").d, 2);
  assert.equal(z.find((q) => q.node.n === "(other)"), undefined);
  // too narrow rects are left out
  assert.equal(MS.icicleLayout(tree, [], 4, 2).find((q) => q.node.n === "g"), undefined);
});

test("frames lose their folder, colours are stable per name", () => {
  assert.equal(MS.shortFrame("arena_map_get at /tmp/b/Objects/obmalloc.c:1459 (inlined)"), "arena_map_get (obmalloc.c:1459) (inlined)");
  assert.equal(MS.shortFrame("_start+0x21 in python3.11"), "_start+0x21 in python3.11");
  assert.equal(MS.colour("main", 15), MS.colour("main", 15));
  assert.notEqual(MS.colour("main", 15), MS.colour("other", 15));
});
