/* memscope report: renders the embedded JSON (model.rs in memscope-report) with uPlot and a
 * small canvas icicle, using the helpers of helpers.js (window.MS). */
(function (root) {
  "use strict";
  const MS = root.MS;
  const { fmtBytes, fmtAxisBytes, fmtTime, sortRows, alignSeries, icicleLayout, colour, shortFrame } = MS;
  const BYTE_INCRS = MS.BYTE_INCRS;
  // ---- page -------------------------------------------------------------------------------
  const PALETTE = ["#2f6fde", "#e0673a", "#2e9e6b", "#9b59d0", "#d6455d", "#1fa3b8", "#c9a227",
    "#6b7a90", "#e85fa8", "#4c8c2b", "#8e6c3e", "#3d4fb3"];
  const state = { run: 0, proc: 0, charts: [], peakSel: null };
  MS.state = state; // read by the browser tests (charts and their scales)
  let DATA;

  function el(tag, attrs, kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "text") e.textContent = v;
      else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v === true ? "" : v);
    }
    for (const c of [].concat(kids || [])) {
      if (c !== null && c !== undefined) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return e;
  }
  const $ = (id) => document.getElementById(id);
  const body = (id) => $(id).querySelector(".body");
  function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); return node; }
  function card(k, v, s, cls) {
    return el("div", { class: "card " + (cls || "") }, [el("div", { class: "k", text: k }),
      el("div", { class: "v", text: v, title: v }), s ? el("div", { class: "s", text: s, title: s }) : null]);
  }
  function seg(options, current, onPick) {
    const box = el("span", { class: "seg" });
    for (const o of options) {
      box.append(el("button", { class: o.value === current ? "on" : "", disabled: o.disabled,
        "data-value": o.value, text: o.label,
        onclick: () => { if (!o.disabled) onPick(o.value); } }));
    }
    return box;
  }
  function select(options, current, onPick) {
    const s = el("select", { onchange: (e) => onPick(e.target.value) });
    for (const o of options) s.append(el("option", { value: o.value, selected: o.value === current, text: o.label }));
    return s;
  }
  const tip = {
    show(e, text) { const t = $("tip"); t.textContent = text; t.hidden = false;
      t.style.left = Math.min(e.clientX + 14, innerWidth - 540) + "px"; t.style.top = (e.clientY + 14) + "px"; },
    hide() { $("tip").hidden = true; },
  };

  /** A sortable table: cols [{key, label, num, fmt(v, row), sort}], shows `page` rows at a time. */
  function table(cols, rows, opts) {
    opts = opts || {};
    const wrap = el("div");
    let key = opts.sortKey, dir = opts.sortDir || -1, shown = opts.page || 200;
    const box = el("div", { class: "tablewrap" });
    const tbl = el("table");
    const thead = el("thead"), tbody = el("tbody");
    tbl.append(thead, tbody);
    box.append(tbl);
    const more = el("div", { class: "more" });
    wrap.append(box, more);
    function draw() {
      clear(thead); clear(tbody); clear(more);
      const tr = el("tr");
      for (const c of cols) {
        const th = el("th", { class: (c.num ? "num " : "") + (c.key === key ? "sorted" + (dir > 0 ? " asc" : "") : ""),
          text: c.label, title: c.title || "Sort by " + c.label,
          onclick: () => { if (key === c.key) dir = -dir; else { key = c.key; dir = c.num ? -1 : 1; } draw(); } });
        tr.append(th);
      }
      thead.append(tr);
      const col = cols.find((c) => c.key === key);
      const sorted = key ? sortRows(rows, col && col.sort ? col.sort : key, dir) : rows;
      for (const r of sorted.slice(0, shown)) {
        const row = el("tr", { class: opts.onRow ? "click" : "" , onclick: opts.onRow ? () => opts.onRow(r) : null });
        for (const c of cols) {
          const v = c.fmt ? c.fmt(r[c.key], r) : r[c.key];
          const td = el("td", { class: (c.num ? "num " : "") + (c.cls || "") });
          if (v instanceof Node) td.append(v); else td.textContent = v === null || v === undefined ? "—" : String(v);
          row.append(td);
        }
        tbody.append(row);
      }
      if (rows.length > shown) {
        more.append(el("button", { class: "small", text: "Show all " + rows.length + " rows",
          onclick: () => { shown = rows.length; draw(); } }));
      }
      if (opts.note) more.append(el("span", { class: "note", text: " " + opts.note }));
    }
    draw();
    return wrap;
  }
  const bytesCol = (key, label) => ({ key, label, num: true, fmt: (v) => fmtBytes(v) });
  const timeCol = (key, label) => ({ key, label: label || "Time", num: true, fmt: (v) => fmtTime(v) });
  function stackCell(r) {
    const parts = [];
    for (const [k, s] of [["Python", r.py_stack], ["C", r.c_stack]]) {
      if (s) parts.push(el("details", {}, [el("summary", { text: k + " stack (" + s.split("\n").filter(Boolean).length + ")" }),
        el("pre", { text: s })]));
    }
    return parts.length ? el("div", {}, parts) : "—";
  }

  // ---- charts -----------------------------------------------------------------------------
  function destroyCharts() { for (const u of state.charts) u.destroy(); state.charts = []; }
  function width(node) { return Math.max(320, (node.clientWidth || 900) - 4); }

  function wheelZoom(bounds) {
    return { hooks: { ready: (u) => {
      u.over.addEventListener("wheel", (e) => {
        e.preventDefault();
        const r = u.over.getBoundingClientRect();
        const min = u.scales.x.min, max = u.scales.x.max, range = max - min;
        if (e.shiftKey || Math.abs(e.deltaX) > Math.abs(e.deltaY)) {
          let d = range * 0.15 * Math.sign(e.deltaY || e.deltaX);
          d = Math.max(bounds[0] - min, Math.min(bounds[1] - max, d));
          u.setScale("x", { min: min + d, max: max + d });
          return;
        }
        const x = u.posToVal(e.clientX - r.left, "x");
        const f = e.deltaY < 0 ? 0.75 : 1 / 0.75;
        u.setScale("x", { min: Math.max(bounds[0], x - (x - min) * f), max: Math.min(bounds[1], x + (max - x) * f) });
      }, { passive: false });
    } } };
  }

  /** Draws step bands and labels, mark lines, leak ticks and peak dots over a chart. */
  function overlay(u, ctx) {
    const c = u.ctx, b = u.bbox, px = uPlot.pxRatio;
    const xmin = u.scales.x.min, xmax = u.scales.x.max;
    const X = (t) => u.valToPos(t, "x", true);
    c.save();
    c.beginPath(); c.rect(b.left, b.top, b.width, b.height); c.clip();
    const steps = ctx.steps || [];
    const visible = steps.filter((s) => (s.end === null ? xmax : s.end) >= xmin && s.start <= xmax);
    c.font = (10 * px) + "px system-ui, sans-serif";
    c.textAlign = "left"; c.textBaseline = "alphabetic";
    const dense = visible.length > 120;
    for (const s of visible) {
      const x0 = X(s.start), x1 = X(s.end === null ? xmax : s.end);
      if (dense) {
        // too many to shade: a tick per step along the top edge
        c.fillStyle = "rgba(47,111,222,0.45)";
        c.fillRect(x0, b.top, Math.max(1, px), 5 * px);
        continue;
      }
      c.fillStyle = s.step % 2 ? "rgba(47,111,222,0.04)" : "rgba(47,111,222,0.09)";
      c.fillRect(x0, b.top, Math.max(1, x1 - x0), b.height);
      c.fillStyle = "rgba(47,111,222,0.45)";
      c.fillRect(x0, b.top, Math.max(1, px), b.height);
      if (visible.length <= 60 && x1 - x0 > 18 * px) { c.fillText("S" + s.step, x0 + 3 * px, b.top + 11 * px); }
    }
    const marks = (ctx.marks || []).filter((m) => m.kind === "Mark" && m.t >= xmin && m.t <= xmax);
    if (marks.length <= 400) {
      c.strokeStyle = "rgba(102,112,133,0.35)"; c.lineWidth = px; c.setLineDash([3 * px, 3 * px]);
      for (const m of marks) { const x = X(m.t); c.beginPath(); c.moveTo(x, b.top + 14 * px); c.lineTo(x, b.top + b.height); c.stroke(); }
      c.setLineDash([]);
    }
    c.fillStyle = "#d6455d";
    const leaks = (ctx.leaks || []).filter((t) => t >= xmin && t <= xmax);
    const sz = (leaks.length > 150 ? 2 : 4) * px;
    for (const t of leaks) {
      const x = X(t), y = b.top + b.height;
      c.beginPath(); c.moveTo(x, y - 2 * sz); c.lineTo(x - sz, y); c.lineTo(x + sz, y); c.fill();
    }
    c.restore();
    for (let i = 1; i < u.series.length; i++) {
      const s = ctx.series[i - 1];
      if (!u.series[i].show || !s || s.peak_v <= 0 || s.peak_t < xmin || s.peak_t > xmax) continue;
      const x = X(s.peak_t), y = u.valToPos(s.peak_v, "y", true);
      c.fillStyle = u.series[i].stroke(); c.strokeStyle = "#fff"; c.lineWidth = 2 * px;
      c.beginPath(); c.arc(x, y, 4.5 * px, 0, 2 * Math.PI); c.fill(); c.stroke();
      if (ctx.labelPeaks) {
        c.fillStyle = "#1d2330"; c.font = (11 * px) + "px system-ui, sans-serif";
        c.textAlign = "left"; c.textBaseline = "alphabetic";
        const label = "peak " + fmtBytes(s.peak_v);
        const w = c.measureText(label).width;
        c.fillText(label, Math.min(x + 7 * px, b.left + b.width - w - 2 * px), Math.max(y - 6 * px, b.top + 24 * px));
      }
    }
  }

  /** A memory chart: series [{label, t, v, peak_t, peak_v}], sharing zoom with `group`. */
  function memChart(node, series, ctx, group, height) {
    const data = alignSeries(series);
    const bounds = [0, Math.max(1, ctx.duration || data[0][data[0].length - 1] || 1)];
    const opts = {
      width: width(node), height: height || 260,
      scales: { x: { time: false, min: bounds[0], max: bounds[1] },
        y: { range: (u, min, max) => [Math.min(0, min * 1.08), max > 0 ? max * 1.08 : 1] } },
      axes: [{ values: (u, vals) => vals.map(fmtTime), space: 90, grid: { stroke: "#eef0f3" } },
        { values: (u, vals) => vals.map(fmtAxisBytes), incrs: BYTE_INCRS, size: 70, grid: { stroke: "#eef0f3" } }],
      series: [{ label: "time", value: (u, v) => fmtTime(v) }].concat(series.map((s, i) => ({
        label: s.label, stroke: s.colour || PALETTE[i % PALETTE.length], width: 1.6, show: s.show !== false,
        fill: s.fill ? (s.colour || PALETTE[i % PALETTE.length]) + "14" : undefined,
        dash: s.what === "reserved" ? [6, 4] : s.what === "sampled" ? [2, 3] : undefined,
        paths: uPlot.paths.stepped({ align: 1 }), points: { show: false },
        value: (u, v) => fmtBytes(v),
      }))),
      cursor: { sync: { key: group }, drag: { x: true, y: false } },
      legend: { live: true },
      hooks: {
        draw: [(u) => overlay(u, ctx)],
        setScale: [(u, key) => {
          if (key !== "x" || state.syncing) return;
          state.syncing = true;
          for (const o of state.charts) if (o !== u && o.syncGroup === group) o.setScale("x", { min: u.scales.x.min, max: u.scales.x.max });
          state.syncing = false;
        }],
      },
      plugins: [wheelZoom(bounds)],
    };
    const u = new uPlot(opts, data, node);
    markDrawn(node, data);
    u.syncGroup = group;
    u.bounds = bounds;
    state.charts.push(u);
    return u;
  }
  /** Records on the chart's element how much it plots (series, non-empty points). */
  function markDrawn(node, data) {
    let points = 0;
    for (let i = 1; i < data.length; i++) for (const v of data[i]) if (v !== null && v !== undefined) points++;
    node.setAttribute("data-series", String(data.length - 1));
    node.setAttribute("data-points", String(points));
  }
  function zoomTo(group, a, b) {
    const pad = Math.max(1, (b - a) * 0.02);
    for (const u of state.charts) if (u.syncGroup === group) { u.setScale("x", { min: Math.max(u.bounds[0], a - pad), max: Math.min(u.bounds[1], b + pad) }); break; }
  }
  function resetZoom(group) {
    for (const u of state.charts) if (u.syncGroup === group) u.setScale("x", { min: u.bounds[0], max: u.bounds[1] });
  }

  // ---- sections ---------------------------------------------------------------------------
  const run = () => DATA.runs[state.run];
  const proc = () => run().processes[state.proc];

  function deviceLabel(d) { return d === "cpu" ? "host (cpu)" : "device " + d; }

  function renderSummary() {
    const r = run(), p = proc();
    const box = clear($("summary"));
    const dev = p.allocators.filter((a) => a.device !== "cpu").sort((a, b) => b.peak - a.peak)[0];
    const host = p.allocators.filter((a) => a.device === "cpu").sort((a, b) => b.peak - a.peak)[0];
    const leaks = p.leaks;
    box.append(card("Run", r.label.split("/").filter(Boolean).pop() || r.label, r.processes.length + " process(es) · " + fmtTime(r.duration_ns)),
      card("Events", r.events.toLocaleString("en-US"), p.label + ": " + p.events.toLocaleString("en-US") + " rows"),
      card("Peak device memory", dev ? fmtBytes(dev.peak) : "—", dev ? dev.pool + " on device " + dev.device + " at " + fmtTime(dev.peak_t) : "no device allocations"),
      card("Peak host memory", host ? fmtBytes(host.peak) : "—", host ? host.pool + " · " + host.peak_blocks.toLocaleString("en-US") + " blocks" : "no host allocations"),
      leaks.pool_recorded
        ? card("Leaks", String(leaks.pool_count), leaks.pool_count ? fmtBytes(leaks.pool_bytes) + " in pool blocks" : "no pool leak (" + leaks.steps_ended + " steps ended)", leaks.pool_count ? "bad" : "good")
        : card("Leaks", "not recorded", "no framework-pool block was traced"),
      card("Steps", String(p.steps.length + p.steps_omitted), p.steps.length ? "longest " + fmtTime(Math.max.apply(null, p.steps.map((s) => (s.end === null ? p.end : s.end) - s.start))) : "no step ranges"),
      card("Inefficient blocks", String(p.inefficient.total), Object.entries(p.inefficient.counts).map(([k, v]) => v + " " + k.split("_")[0]).join(" · ")));
  }

  function seriesLabel(s) { return s.what === "sampled" ? s.pool : s.pool + (s.what === "reserved" ? " reserved" : s.pool === "HAL" || s.pool.startsWith("HOST") ? "" : " allocated"); }

  function renderMemory() {
    const p = proc(), b = clear(body("memory"));
    const devices = [...new Set(p.series.map((s) => s.device))];
    if (!devices.length) { b.append(el("div", { class: "empty", text: "No MALLOC/FREE rows in this process." })); return; }
    b.append(el("div", { class: "note", text: "Drag to zoom, wheel to zoom around the cursor, shift+wheel to pan, double-click to reset; click a legend entry to show or hide a series (reserved bytes start hidden). Shaded bands are steps, dashed lines msTX marks, red ticks leaked blocks, dots each series' peak; dotted lines are memory samples (--sample): the sampled RSS and what no hook tracked (RSS − live HOST/HOST_MMAP/PYMEM blocks)." }),
      el("div", { class: "bar" }, [el("button", { class: "small", text: "Reset zoom", onclick: () => resetZoom("mem") }),
        p.steps.length ? el("button", { class: "small", text: "Zoom to the steps", onclick: () => zoomTo("mem", p.steps[0].start, p.steps[p.steps.length - 1].end === null ? p.end : p.steps[p.steps.length - 1].end) }) : null]));
    const steps = p.steps, marks = p.marks, leaks = p.leaks.pool.map((l) => l.t).filter((t) => t !== null);
    const groups = [];
    for (const d of devices) {
      const mine = p.series.filter((s) => s.device === d);
      const hal = mine.filter((s) => s.pool === "HAL" || s.what === "sampled");
      const rest = mine.filter((s) => s.pool !== "HAL" && s.what !== "sampled");
      if (d === "cpu") groups.push([d, "host memory", mine]);
      else {
        if (rest.length) groups.push([d, "framework pools", rest]);
        if (hal.length) groups.push([d, "driver (HAL)", hal]);
      }
    }
    for (const [d, what, list] of groups) {
      const ss = list.map((s) => Object.assign({ label: seriesLabel(s), show: s.what !== "reserved", until: p.end }, s));
      const box = el("div", { "data-device": d });
      b.append(el("div", { class: "chart" }, [el("div", { class: "ttl", text: deviceLabel(d) + " · " + what }), box]));
      const isPool = what === "framework pools";
      memChart(box, ss, { steps, marks, leaks: isPool ? leaks : [], series: ss, duration: run().duration_ns, labelPeaks: true }, "mem", 230);
    }
    const boxes = el("div", { class: "peakbox" });
    for (const a of p.allocators.slice().sort((x, y) => (x.device === "cpu") - (y.device === "cpu") || y.peak - x.peak).slice(0, 4)) {
      const v = a.at.peak;
      const list = el("ol");
      for (const blk of v.blocks.slice(0, 5)) {
        const what = [blk.owner, blk.under, shortFrame(blk.frame)].filter((x) => x && x !== "(no owner)").join(" · ");
        list.append(el("li", { text: fmtBytes(blk.size) + " — " + (what || "no owner, op or stack recorded"), title: blk.frame }));
      }
      boxes.append(el("div", { class: "card" }, [
        el("div", { class: "k", text: "Live at the peak of " + a.pool + " on " + deviceLabel(a.device) }),
        el("div", {}, [el("b", { text: fmtBytes(a.peak) }), " in " + a.peak_blocks.toLocaleString("en-US") + " block(s) at " + fmtTime(a.peak_t) + " · ",
          el("a", { href: "#peak", text: "details", onclick: () => { state.peakSel = a.device + "|" + a.pool; renderPeak(); } })]),
        list]));
    }
    b.append(el("h3", { text: "What was live at the peak" }), boxes);
  }

  function renderSteps() {
    const p = proc(), b = clear(body("steps"));
    if (!p.steps.length) { b.append(el("div", { class: "empty", text: "No steps: the job marked none (msTX \"step start\" ranges or Python step() calls)." })); return; }
    const keys = [];
    for (const s of p.steps) for (const l of s.levels) { const k = l.device + "|" + l.pool; if (!keys.includes(k)) keys.push(k); }
    const best = keys.find((k) => /\|PTA$/.test(k)) || keys.find((k) => !k.startsWith("cpu")) || keys[0];
    const pick = state.stepLevel && keys.includes(state.stepLevel) ? state.stepLevel : best;
    const levelOf = (s) => s.levels.find((l) => l.device + "|" + l.pool === pick);
    b.append(el("div", { class: "bar" }, ["Level ", select(keys.map((k) => ({ value: k, label: k.replace("|", " · ") })), pick,
      (v) => { state.stepLevel = v; renderSteps(); })]));
    if (p.steps_omitted) b.append(el("div", { class: "note", text: p.steps_omitted + " steps left out (every k-th step is shown)." }));
    const chartBox = el("div", { class: "chart" });
    b.append(chartBox);
    const xs = p.steps.map((s) => s.step);
    const lv = p.steps.map(levelOf);
    const u = new uPlot({
      width: width(b), height: 200,
      scales: { x: { time: false, range: (u, min, max) => [min - 0.6, max + 0.6] }, y: { range: (u, min, max) => [Math.min(0, min), max > 0 ? max * 1.1 : 1] } },
      axes: [{ values: (u, v) => v.map((x) => Number.isInteger(x) ? "S" + x : ""), grid: { stroke: "#eef0f3" },
        splits: xs.length <= 40 ? () => xs : undefined },
        { values: (u, v) => v.map(fmtAxisBytes), incrs: BYTE_INCRS, size: 70, grid: { stroke: "#eef0f3" } }],
      series: [{ label: "step", value: (u, v) => v === null ? "—" : "step " + v },
        { label: "peak", stroke: "#2f6fde", fill: "#2f6fde55", paths: uPlot.paths.bars({ size: [0.6, 60] }), points: { show: false }, value: (u, v) => fmtBytes(v) },
        { label: "end of step", stroke: "#e0673a", width: 2, points: { show: true, size: 5 }, value: (u, v) => fmtBytes(v) },
        { label: "Δ in step", stroke: "#2e9e6b", width: 1.5, dash: [4, 3], points: { show: false }, value: (u, v) => fmtBytes(v) }],
      cursor: { drag: { x: true, y: false } },
    }, [xs, lv.map((l) => l ? l.peak : null), lv.map((l) => l ? l.end : null), lv.map((l) => l ? l.delta : null)], chartBox);
    markDrawn(chartBox, u.data);
    state.charts.push(u);
    const rows = [];
    for (const s of p.steps) for (const l of s.levels) {
      rows.push(Object.assign({ step: s.step, start: s.start, dur: s.end === null ? null : s.end - s.start }, l));
    }
    b.append(table([
      { key: "step", label: "Step", num: true }, timeCol("start", "Start"), timeCol("dur", "Duration"),
      { key: "device", label: "Device" }, { key: "pool", label: "Pool" },
      bytesCol("peak", "Peak"), bytesCol("end", "End"),
      { key: "delta", label: "Δ in step", num: true, fmt: (v) => el("span", { class: v > 0 ? "pos" : v < 0 ? "neg" : "", text: (v > 0 ? "+" : "") + fmtBytes(v) }) },
      bytesCol("reserved_peak", "Reserved peak"), { key: "mallocs", label: "MALLOC", num: true }, { key: "frees", label: "FREE", num: true },
      bytesCol("gap_min", "Gap min"), bytesCol("gap_max", "Gap max"),
      { key: "gap_ratio", label: "Min/Max %", num: true, fmt: (v) => v === null ? "—" : v.toFixed(2) },
    ], rows, { sortKey: "step", sortDir: 1, page: 100 }));
  }

  function renderLeaks() {
    const p = proc(), b = clear(body("leaks")), L = p.leaks;
    b.append(el("div", { class: "note", text: "A framework-pool block allocated in step ≥ 2 and still live when a later step ended and at the end of the run (" +
      L.steps_ended + " step(s) ended; blocks of step 1 and of the last ended step are not judged)." }));
    if (!L.pool_recorded) b.append(el("div", { class: "empty", text: "Not recorded: no framework-pool block (PTA, MindSpore, ATB) was traced, so no leak was looked for." }));
    else if (!L.pool_count) b.append(el("div", { class: "empty", text: "No memory pool leaks detected." }));
    else {
      b.append(el("div", { class: "bar" }, [el("b", { class: "pos", text: L.pool_count + " leaked block(s), " + fmtBytes(L.pool_bytes) })]));
      b.append(table([{ key: "id", label: "ID", num: true }, timeCol("t"), { key: "device", label: "Device" }, { key: "pool", label: "Pool" },
        bytesCol("size", "Size"), { key: "addr", label: "Address", cls: "mono" }, { key: "step", label: "Step", num: true },
        { key: "under", label: "Op / kernel" }, { key: "owner", label: "Owner" },
        { key: "stack", label: "Stack", fmt: (v, r) => stackCell(r) }], L.pool,
      { sortKey: "id", sortDir: 1, note: L.pool.length < L.pool_count ? "(" + L.pool.length + " of " + L.pool_count + " shown)" : "" }));
    }
    b.append(el("h3", { text: "HAL memory live at exit (driver memory, not a leak by msMemScope's rule)" }));
    if (!p.allocators.some((a) => a.pool === "HAL")) b.append(el("div", { class: "empty", text: "Not recorded: driver memory (HAL) was not traced." }));
    else if (!L.hal_count) b.append(el("div", { class: "empty", text: "There is no HAL memory live at exit." }));
    else {
      b.append(el("div", { class: "note", text: L.hal_count + " block(s), " + fmtBytes(L.hal_bytes) }));
      b.append(table([{ key: "device", label: "Device" }, { key: "addr", label: "Address", cls: "mono" }, bytesCol("size", "Size"), { key: "site", label: "Allocated at", cls: "mono" }], L.hal, { sortKey: "size" }));
    }
  }

  function icicle(node, tree, base) {
    const wrap = el("div"), crumbs = el("div", { class: "crumbs" }), box = el("div", { class: "icicle" });
    const cv = el("canvas");
    box.append(cv);
    wrap.append(crumbs, box);
    node.append(wrap);
    let path = [], rects = [];
    const ROW = 18;
    function draw() {
      const w = width(box), px = window.devicePixelRatio || 1;
      rects = icicleLayout(tree, path, w, 0.4);
      const depth = rects.reduce((m, r) => Math.max(m, r.d), 0) + 1;
      cv.width = w * px; cv.height = depth * ROW * px; cv.style.height = depth * ROW + "px";
      const c = cv.getContext("2d");
      c.scale(px, px);
      c.font = "11px system-ui, sans-serif"; c.textBaseline = "middle";
      for (const r of rects) {
        const onPath = r.d <= path.length;
        c.fillStyle = r.d === 0 ? "#d9dee7" : onPath ? "#c3cad6" : r.node.n === "(other)" ? "#e4e6ea" : colour(r.node.n, base);
        c.fillRect(r.x, r.d * ROW, Math.max(r.w - 1, 0.5), ROW - 1);
        if (r.w > 34) {
          const label = shortFrame(r.node.n) + " · " + fmtBytes(r.node.v);
          c.fillStyle = "#1d2330";
          c.save(); c.beginPath(); c.rect(r.x, r.d * ROW, r.w - 2, ROW); c.clip();
          c.fillText(label, r.x + 4, r.d * ROW + ROW / 2); c.restore();
        }
      }
      clear(crumbs);
      let n = tree;
      crumbs.append(el("a", { text: "all", onclick: () => { path = []; draw(); } }));
      path.forEach((i, k) => { n = n.c[i]; const p = path.slice(0, k + 1);
        const t = shortFrame(n.n);
        crumbs.append(" › ", el("a", { text: t.length > 48 ? t.slice(0, 47) + "…" : t, title: n.n, onclick: () => { path = p; draw(); } })); });
      crumbs.append(el("span", { text: "  — click a frame to zoom in, a bar above to zoom out" }));
    }
    const hit = (e) => { const r = cv.getBoundingClientRect(), x = e.clientX - r.left, d = Math.floor((e.clientY - r.top) / ROW);
      return rects.find((q) => q.d === d && x >= q.x && x < q.x + q.w); };
    cv.addEventListener("mousemove", (e) => { const q = hit(e); if (!q) return tip.hide();
      tip.show(e, q.node.n + "\n" + fmtBytes(q.node.v) + " · " + (100 * q.node.v / Math.max(1, tree.v)).toFixed(1) + "% · " + q.node.b.toLocaleString("en-US") + " block(s)"); });
    cv.addEventListener("mouseleave", () => tip.hide());
    cv.addEventListener("click", (e) => { const q = hit(e); if (q) { path = q.path; draw(); } });
    draw();
    return { zoom(p) { path = p; draw(); }, get path() { return path; } };
  }

  function renderPeak() {
    const p = proc(), b = clear(body("peak"));
    if (!p.allocators.length) { b.append(el("div", { class: "empty", text: "No MALLOC rows in this process." })); return; }
    const keyOf = (a) => a.device + "|" + a.pool;
    const sorted = p.allocators.slice().sort((x, y) => (x.device === "cpu") - (y.device === "cpu") || y.peak - x.peak);
    // default: an allocator with stacks, else the largest framework pool, else the largest
    const stacked = sorted.find((x) => x.at.peak.c || x.at.peak.py);
    const pool = sorted.find((x) => /^(PTA|PTA_WORKSPACE|MindSpore|ATB)$/.test(x.pool));
    const a = sorted.find((x) => keyOf(x) === state.peakSel) || stacked || pool || sorted[0];
    const moment = state.peakMoment || "peak";
    const v = a.at[moment];
    const views = [{ value: "owners", label: "By owner" }, { value: "py", label: "By Python stack", disabled: !v.py }, { value: "c", label: "By C stack", disabled: !v.c }];
    let view = state.peakView && !views.find((x) => x.value === state.peakView).disabled ? state.peakView : (v.c ? "c" : v.py ? "py" : "owners");
    b.append(el("div", { class: "bar" }, [
      "Allocator ", select(sorted.map((x) => ({ value: keyOf(x), label: x.pool + " on " + deviceLabel(x.device) + " — peak " + fmtBytes(x.peak) })), keyOf(a),
        (val) => { state.peakSel = val; renderPeak(); }),
      seg([{ value: "peak", label: "At the peak" }, { value: "end", label: "At the end" }], moment, (m) => { state.peakMoment = m; renderPeak(); }),
      seg(views, view, (w) => { state.peakView = w; renderPeak(); }),
      view === "owners" ? null : seg([{ value: "out", label: "Outermost frame on top" }, { value: "in", label: "Allocation site on top" }],
        state.peakInverted ? "in" : "out", (x) => { state.peakInverted = x === "in"; renderPeak(); })]));
    b.append(el("div", { class: "note", text: moment === "peak"
      ? fmtBytes(a.peak) + " in " + a.peak_blocks.toLocaleString("en-US") + " block(s) were live at " + fmtTime(a.peak_t) + ", the first moment " + a.pool + " on " + deviceLabel(a.device) + " was highest."
      : fmtBytes(a.end) + " in " + a.end_blocks.toLocaleString("en-US") + " block(s) were live at the end of the run (never freed)." }));
    const inverted = view !== "owners" && state.peakInverted;
    const tree = view === "owners" ? v.owners : inverted ? v[view + "_inverted"] : v[view];
    if (!tree || !tree.v) b.append(el("div", { class: "empty", text: "Nothing was live." }));
    else {
      b.append(el("div", { class: "note", text: view === "owners" ? "Owner chains (decompose analysis), outermost level on top."
        : inverted ? "Stacks with the innermost frame (where the block was allocated) on top, its callers below." : "Stacks with the outermost frame on top." }));
      const ic = icicle(b, tree, view === "owners" ? 195 : 15);
      state.icicle = ic;
    }
    const cols = el("div", { class: "cols2" });
    const left = el("div", {}, [el("h3", { text: "Top allocation sites (" + v.site_kind + ")" }),
      v.site_kind === "op/kernel" ? null : el("div", { class: "note", text: "Each block is counted at the first frame of your code in its stacks (Python frames over C frames; interpreter, memscope and library frames skipped: MEMSCOPE_OWN_FRAMES and MEMSCOPE_LIBRARY_FRAMES change the lists), split by the frame that called it. Hover a site for its full stack." }),
      table([{ key: "site", label: "Site", cls: "mono", fmt: (x, r) => (x ? el("span", { title: (r.rule ? "[" + r.rule + "]\n" : "") + (r.stack || x), text: shortFrame(x) }) : "—") },
        { key: "caller", label: "Called from", cls: "mono", fmt: (x) => (x ? el("span", { title: x, text: shortFrame(x) }) : "—") },
        bytesCol("bytes", "Bytes"), { key: "blocks", label: "Blocks", num: true },
        { key: "share", label: "Share", num: true, sort: (r) => r.bytes, fmt: (x, r) => (100 * r.bytes / Math.max(1, moment === "peak" ? a.peak : a.end)).toFixed(1) + "%" }],
      v.sites, { sortKey: "bytes", page: 25 })]);
    const right = el("div", {}, [el("h3", { text: "Largest blocks" }),
      table([{ key: "id", label: "ID", num: true }, timeCol("t", "Allocated"), bytesCol("size", "Size"), { key: "owner", label: "Owner" },
        { key: "under", label: "Op / kernel" }, { key: "frame", label: "Frame", cls: "mono", fmt: (x) => (x ? el("span", { title: x, text: shortFrame(x) }) : "—") }],
      v.blocks.map((x) => Object.assign({}, x, { owner: x.owner === "(no owner)" ? null : x.owner, under: x.under || null, frame: x.frame || null })), { sortKey: "size", page: 25 })]);
    cols.append(left, right);
    b.append(cols);
  }

  function renderInefficient() {
    const p = proc(), b = clear(body("inefficient")), I = p.inefficient;
    const cards = el("div", { class: "peakbox" });
    for (const [k, n] of Object.entries(I.counts)) cards.append(card(k.replace(/_/g, " "), String(n), "block(s)"));
    b.append(el("div", { class: "note", text: "msMemScope's op-sequence rules over PTA and ATB blocks (temporary idleness: more than " + I.idle_threshold + " ops between two uses)." }), cards);
    if (!I.total) { b.append(el("div", { class: "empty", text: "No inefficient block found." })); return; }
    b.append(el("h3", { text: "Annotated blocks" }), table([{ key: "id", label: "ID", num: true }, timeCol("t"), { key: "device", label: "Device" },
      { key: "pool", label: "Pool" }, bytesCol("size", "Size"), { key: "op", label: "Op" },
      { key: "types", label: "Classes", sort: (r) => r.types.join(","), fmt: (v) => el("span", {}, v.map((t) => el("span", { class: "tag " + t, text: t }))) }],
    I.blocks, { sortKey: "size", note: I.blocks.length < I.total ? "(" + I.blocks.length + " of " + I.total + " shown, largest first)" : "" }));
  }

  function renderProcesses() {
    const r = run(), b = clear(body("processes")), O = r.overview;
    $("processes").hidden = r.processes.length < 2;
    if (r.processes.length < 2) return;
    b.append(el("div", { class: "note", text: r.processes.length + " processes; one line per process: " + (O.metric || "device memory") + ". Click a row to select the process." }));
    if (O.imbalance) {
      const I = O.imbalance;
      b.append(el("div", { class: "peakbox" }, [card("Highest peak", fmtBytes(I.max), I.max_label), card("Lowest peak", fmtBytes(I.min), I.min_label),
        card("Imbalance", I.spread_pct.toFixed(1) + "%", "(max − min) / max · max/mean " + I.max_over_mean.toFixed(2), I.spread_pct > 20 ? "bad" : "")]));
    }
    const list = O.rows.filter((x) => r.processes[x.process].headline).slice(0, 24);
    const series = list.map((x, i) => Object.assign({ label: x.label, colour: PALETTE[i % PALETTE.length], until: r.processes[x.process].end }, r.processes[x.process].headline));
    const box = el("div", { class: "chart" });
    b.append(box);
    if (series.length) memChart(box, series, { series, duration: r.duration_ns }, "procs", 240);
    if (O.rows.length > list.length) b.append(el("div", { class: "note", text: "The chart shows the first " + list.length + " processes." }));
    b.append(table([{ key: "label", label: "Process" }, { key: "devices", label: "Devices", fmt: (v) => v.join(", ") }, { key: "metric", label: "Measure" },
      bytesCol("peak", "Peak"), timeCol("peak_t", "Peak at"), bytesCol("end", "End"), { key: "events", label: "Events", num: true },
      { key: "leaks", label: "Leaks", num: true }, bytesCol("leak_bytes", "Leaked")], O.rows,
    { sortKey: "peak", onRow: (x) => { state.proc = x.process; renderPicks(); renderProcess(); } }));
  }

  function diffCell(v, max) {
    const w = max ? Math.round(60 * Math.abs(v) / max) : 0;
    return el("span", {}, [el("span", { class: v > 0 ? "pos" : v < 0 ? "neg" : "", text: (v > 0 ? "+" : "") + fmtBytes(v) }),
      w ? el("span", { class: "diffbar", style: "width:" + w + "px;background:" + (v > 0 ? "#d6455d" : "#2e9e6b") }) : null]);
  }

  function renderCompare() {
    const C = DATA.compare, b = clear(body("compare"));
    $("compare").hidden = !C;
    if (!C) return;
    b.append(el("div", { class: "note", text: "Base: " + C.base + " — compare: " + C.compare + ". Each op/kernel's memory change (net bytes allocated inside it), aligned by name (Myers diff); Diff = compare − base." }));
    if (!C.levels.length) { b.append(el("div", { class: "empty", text: "Neither run has op or kernel rows (run with --level op,kernel)." })); return; }
    // default: the level whose names differ most
    const weight = (l) => l.by_name.reduce((a, r) => a + Math.abs(r.diff), 0);
    const lv = C.levels.find((l) => l.level === state.cmpLevel) || C.levels.slice().sort((a, b) => weight(b) - weight(a))[0];
    b.append(el("div", { class: "bar" }, ["Level ", seg(C.levels.map((l) => ({ value: l.level, label: l.level })), lv.level, (x) => { state.cmpLevel = x; renderCompare(); })]));
    for (const n of lv.notes) b.append(el("div", { class: "note", text: "Note: " + n }));
    const maxA = Math.max(1, ...lv.by_name.map((r) => Math.abs(r.diff)));
    b.append(el("h3", { text: "Per " + lv.level + " name (" + lv.names_total + ")" }), table([{ key: "name", label: "Name", cls: "mono" }, { key: "device", label: "Device", num: true },
      { key: "base_n", label: "Base calls", num: true }, { key: "compare_n", label: "Compare calls", num: true },
      bytesCol("base", "Base"), bytesCol("compare", "Compare"), { key: "diff", label: "Diff", num: true, sort: (r) => Math.abs(r.diff), fmt: (v) => diffCell(v, maxA) }],
    lv.by_name, { sortKey: "diff", page: 50 }));
    const maxR = Math.max(1, ...lv.rows.map((r) => Math.abs(r.diff)));
    b.append(el("h3", { text: "Aligned rows (" + lv.rows_total + ")" }), table([{ key: "i", label: "#", num: true }, { key: "name", label: "Name", cls: "mono" }, { key: "device", label: "Device", num: true },
      bytesCol("base", "Base"), bytesCol("compare", "Compare"), { key: "diff", label: "Diff", num: true, sort: (r) => Math.abs(r.diff), fmt: (v) => diffCell(v, maxR) }],
    lv.rows, { sortKey: "i", sortDir: 1, page: 100, note: lv.rows.length < lv.rows_total ? "(" + lv.rows.length + " rows with the largest |diff| of " + lv.rows_total + ")" : "" }));
  }

  function renderDiff() {
    const D = DATA.diff, b = clear(body("diff"));
    $("diff").hidden = !D;
    if (!D) return;
    b.append(el("div", { class: "note", text: "Live memory of " + D.compare + " minus " + D.base + " (as memscope diff), summed over each run's processes: by allocation site (innermost Python frame) or owner, at the end or at each allocator's peak. + grew, − shrank; allocators are never added together (pool blocks live inside driver memory)." }));
    const by = state.diffBy || "python", point = state.diffPoint || "end";
    const v = D.views.find((x) => x.by === by && x.point === point) || D.views[0];
    b.append(el("div", { class: "bar" }, ["Group by ", seg([{ value: "python", label: "site" }, { value: "owner", label: "owner" }], v.by, (x) => { state.diffBy = x; renderDiff(); }),
      " at ", seg([{ value: "end", label: "end" }, { value: "peak", label: "peak" }], v.point, (x) => { state.diffPoint = x; renderDiff(); })]));
    if (!v.rows.length) { b.append(el("div", { class: "empty", text: "No group differs." })); return; }
    const max = Math.max(1, ...v.rows.map((r) => Math.abs(r.diff)));
    b.append(table([{ key: "device", label: "Device" }, { key: "pool", label: "Allocator" }, { key: "key", label: v.by === "owner" ? "Owner" : "Site", cls: "mono" },
      bytesCol("base", "Base"), bytesCol("compare", "Compare"), { key: "diff", label: "+/−", num: true, sort: (r) => r.diff, fmt: (x) => diffCell(x, max) },
      { key: "diff_blocks", label: "Blocks +/−", num: true, fmt: (x) => (x > 0 ? "+" : "") + x }],
    v.rows, { sortKey: "diff", page: 50, note: v.rows.length < v.rows_total ? "(" + v.rows.length + " groups with the largest change of " + v.rows_total + ")" : "" }));
  }

  function renderText() {
    const p = proc(), b = clear(body("text"));
    for (const s of p.text) b.append(el("details", {}, [el("summary", { text: s.title }), el("pre", { text: s.lines.join("\n") })]));
  }

  function renderPicks() {
    const box = clear($("picks"));
    if (DATA.runs.length > 1) {
      box.append(el("label", {}, ["Run", select(DATA.runs.map((r, i) => ({ value: String(i), label: (i ? "compare: " : "base: ") + r.label })), String(state.run),
        (v) => { state.run = +v; state.proc = 0; renderPicks(); renderRun(); })]));
    }
    const r = run();
    if (r.processes.length > 1) {
      box.append(el("label", {}, ["Process", select(r.processes.map((p, i) => ({ value: String(i), label: p.label + " · " + p.events.toLocaleString("en-US") + " rows" })), String(state.proc),
        (v) => { state.proc = +v; renderProcess(); })]));
    }
  }

  function renderNav() {
    const nav = clear($("nav"));
    for (const s of document.querySelectorAll("main > section[id]")) {
      if (s.id === "summary" || s.hidden) continue;
      nav.append(el("a", { href: "#" + s.id, text: s.querySelector("h2").textContent.replace("Where memory goes", "Peak").replace("Memory over time", "Memory").replace("Inefficient memory", "Inefficient").replace("Analysis output", "Text")
        .replace("What holds the memory", "Roles").replace("Fragmentation and OOM", "Fragmentation") }));
    }
  }

  function renderProcess() {
    destroyCharts();
    renderSummary(); renderMemory(); renderSteps(); renderLeaks(); renderPeak();
    for (const f of MS.sections) f(proc(), run()); // roles.js: roles, fragmentation
    renderInefficient(); renderProcesses(); renderText();
    renderCompare(); renderDiff(); renderNav();
  }
  // for roles.js, loaded after this file
  MS.sections = [];
  MS.ui = { el, clear, body, card, seg, table, memChart, bytesCol, timeCol, deviceLabel, state, PALETTE };
  function renderRun() { renderProcess(); }

  function start() {
    try {
      DATA = JSON.parse($("report-data").textContent);
      if (DATA.schema !== "memscope-report/1") throw new Error("unknown report data " + DATA.schema);
      document.title = "memscope report — " + DATA.runs.map((r) => r.label).join(" vs ");
      // the heaviest process first
      const r0 = DATA.runs[0];
      state.proc = r0.processes.reduce((best, p, i) => (p.events > r0.processes[best].events ? i : best), 0);
      renderPicks();
      renderProcess();
      $("footer").textContent = DATA.tool + " · generated " + DATA.generated + " · " + DATA.runs.map((r) => MS.inputCounts(r.inputs)).join(" + ") +
        " · series ≤ " + DATA.limits.series_buckets + " buckets, tables ≤ " + DATA.limits.table_rows + " rows";
      let t;
      window.addEventListener("resize", () => { clearTimeout(t); t = setTimeout(renderProcess, 200); });
      document.body.setAttribute("data-ready-ms", String(Math.round(performance.now())));
      document.body.setAttribute("data-ready", "1");
    } catch (e) {
      const box = $("error");
      box.hidden = false;
      box.textContent = "This report could not be shown: " + e.message;
      document.body.setAttribute("data-error", e.message);
      throw e;
    }
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})(typeof window !== "undefined" ? window : globalThis);

