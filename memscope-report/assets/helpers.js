/* memscope report: the page's pure helpers (formatting, sorting, series alignment, icicle
 * layout), shared with the node tests (tests/js). Loaded before report.js. */
(function (root) {
  "use strict";

  // ---- pure helpers -----------------------------------------------------------------------
  const UNITS = ["B", "KiB", "MiB", "GiB", "TiB"];
  function fmtBytes(n) {
    if (n === null || n === undefined || Number.isNaN(n)) return "—";
    const neg = n < 0;
    let v = Math.abs(n), i = 0;
    while (v >= 1024 && i < UNITS.length - 1) { v /= 1024; i++; }
    const s = i === 0 ? String(v) : v.toFixed(v >= 100 ? 1 : 2);
    return (neg ? "−" : "") + s + " " + UNITS[i];
  }
  function fmtTime(ns) {
    if (ns === null || ns === undefined) return "—";
    const a = Math.abs(ns);
    if (a >= 1e9) return (ns / 1e9).toFixed(a >= 1e11 ? 0 : 3) + " s";
    if (a >= 1e6) return (ns / 1e6).toFixed(a >= 1e8 ? 0 : 2) + " ms";
    if (a >= 1e3) return (ns / 1e3).toFixed(1) + " µs";
    return Math.round(ns) + " ns";
  }
  function cmp(a, b) {
    if (a === b) return 0;
    if (a === null || a === undefined) return 1;
    if (b === null || b === undefined) return -1;
    if (typeof a === "number" && typeof b === "number") return a - b;
    return String(a).localeCompare(String(b));
  }
  /** Rows sorted by `key` (a field name or a function), `dir` 1 or -1; empty values last. */
  function sortRows(rows, key, dir) {
    const get = typeof key === "function" ? key : (r) => r[key];
    return rows.map((r, i) => [r, i]).sort((x, y) => {
      const a = get(x[0]), b = get(y[0]);
      const empty = (v) => v === null || v === undefined;
      if (empty(a) || empty(b)) return empty(a) - empty(b) || x[1] - y[1];
      return dir * cmp(a, b) || x[1] - y[1];
    }).map((p) => p[0]);
  }
  /** Aligns step series {t, v, until} on the union of their times (and `until`s), each value
   * carried forward until its next point (memory levels hold between events) and, when
   * `until` is given (the process's end), no further. Returns [xs, ys...]. */
  function alignSeries(list) {
    const times = list.map((s) => (s.until !== undefined && s.until !== null ? s.t.concat([s.until]) : s.t));
    const xs = [];
    const idx = list.map(() => 0);
    for (;;) {
      let next = Infinity;
      times.forEach((t, k) => { if (idx[k] < t.length && t[idx[k]] < next) next = t[idx[k]]; });
      if (next === Infinity) break;
      xs.push(next);
      times.forEach((t, k) => { while (idx[k] < t.length && t[idx[k]] <= next) idx[k]++; });
    }
    const out = [xs];
    for (const s of list) {
      const ys = new Array(xs.length);
      const end = s.until !== undefined && s.until !== null ? s.until : Infinity;
      let j = 0, cur = null;
      for (let i = 0; i < xs.length; i++) {
        while (j < s.t.length && s.t[j] <= xs[i]) cur = s.v[j++];
        ys[i] = xs[i] > end ? null : cur;
      }
      out.push(ys);
    }
    return out;
  }
  /** Icicle layout of `tree` ({n, v, b, c}) zoomed on the node at `path` (child indices from
   * the root): the path's nodes span the full width, then the zoomed node's subtree in
   * proportion. Returns rects {x, w, d, node, path} (x, w in [0, width]); rects under
   * `minW` are left out. */
  function icicleLayout(tree, path, width, minW) {
    const rects = [];
    let node = tree;
    const trail = [];
    rects.push({ x: 0, w: width, d: 0, node: tree, path: [] });
    for (const i of path) {
      if (!node.c || !node.c[i]) break;
      node = node.c[i];
      trail.push(i);
      rects.push({ x: 0, w: width, d: trail.length, node, path: trail.slice() });
    }
    const scale = node.v > 0 ? width / node.v : 0;
    (function walk(n, x, d, p) {
      let cx = x;
      for (let i = 0; i < (n.c || []).length; i++) {
        const k = n.c[i];
        const w = k.v * scale;
        if (w >= minW) {
          const kp = p.concat([i]);
          rects.push({ x: cx, w, d, node: k, path: kp });
          walk(k, cx, d + 1, kp);
        }
        cx += w;
      }
    })(node, 0, trail.length + 1, trail);
    return rects;
  }
  /** Same colour for the same name: a hue from a string hash within a palette range. */
  function colour(name, base) {
    let h = 0;
    for (let i = 0; i < name.length; i++) h = (h * 31 + name.charCodeAt(i)) | 0;
    const hue = base + (Math.abs(h) % 50);
    const light = 62 + (Math.abs(h >> 8) % 14);
    return "hsl(" + hue + ",70%," + light + "%)";
  }
  /** Bytes for an axis tick: as fmtBytes without trailing zeros (`16 MiB`, `1.5 GiB`). */
  function fmtAxisBytes(n) {
    return fmtBytes(n).replace(/\.0+ /, " ").replace(/(\.\d*?)0+ /, "$1 ");
  }
  /** Tick increments for byte axes: powers of two and their 1.5 multiples. */
  const BYTE_INCRS = [];
  for (let k = 0; k < 52; k++) { BYTE_INCRS.push(2 ** k); BYTE_INCRS.push(3 * 2 ** k); }
  BYTE_INCRS.sort((a, b) => a - b);
  /** A frame as the dumps write it (`f at /long/path/file.c:12 (inlined)`) with the folder
   * left out: `f (file.c:12) (inlined)`. */
  function shortFrame(s) {
    return String(s).replace(/ at (?:\S*\/)?([^/\s]+:\d+)/, " ($1)");
  }
  /** "2 dump file(s), 1 capture(s)": a run's inputs as `memscope report` counts them. */
  function inputCounts(inputs) {
    const caps = inputs.filter((n) => /\.mscap$/.test(n)).length;
    return (inputs.length - caps) + " dump file(s)" + (caps ? ", " + caps + " capture(s)" : "");
  }
  const MS = { fmtBytes, fmtAxisBytes, fmtTime, sortRows, alignSeries, icicleLayout, colour, shortFrame, inputCounts, BYTE_INCRS };
  if (typeof module !== "undefined" && module.exports) { module.exports = MS; }
  root.MS = MS;
})(typeof window !== "undefined" ? window : globalThis);
