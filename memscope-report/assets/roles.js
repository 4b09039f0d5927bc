/* memscope report: "What holds the memory" (bytes by role over time, at the peak, per step, the
 * activations by module) and "Fragmentation and OOM" (the pools' free bytes, largest free
 * extent and fragmentation over time, and the OOM verdicts), issue 25. Uses report.js's
 * widgets (MS.ui); registered in MS.sections, drawn with every process. */
(function (root) {
  "use strict";
  const MS = root.MS;
  const { fmtBytes, fmtTime, alignSeries } = MS;
  const ROLE_COLOURS = { weight: "#2f6fde", gradient: "#e0673a", optimizer_state: "#9b59d0", activation: "#2e9e6b",
    kv_cache: "#1fa3b8", sharded_weight: "#3d4fb3", all_gather: "#c9a227", graph_pool: "#8e6c3e", temp: "#6b7a90" };
  const same = (x, a) => x.device === a.device && x.pool === a.pool;
  const split = (m) => Object.entries(m).map(([r, v]) => r + " " + fmtBytes(v)).join(" · ") || "—";

  function renderRoles(p, r) {
    const { el, clear, body, table, memChart, bytesCol, deviceLabel } = MS.ui;
    const b = clear(body("roles")), R = p.roles;
    if (!R.any) {
      b.append(el("div", { class: "empty", text: "No block has a role: run with --analysis decompose (memscope's framework hooks then tag weights, gradients, optimizer state and the activations of each nn.Module)." }));
      return;
    }
    b.append(el("div", { class: "note", text: "Roles come from the owner chain (PTA@weight, PTA@activation@model.layers.3.mlp); a role given after the MALLOC (the optimizer hook tags weights, gradients and optimizer state at each step) counts from the MALLOC on. Each curve shows the highest bytes of its time bucket." }));
    for (const a of R.totals) {
      const ss = R.series.filter((s) => same(s, a)).map((s) => Object.assign({ label: s.what, colour: ROLE_COLOURS[s.what], until: p.end }, s));
      const box = el("div", { "data-roles": a.device + "|" + a.pool });
      b.append(el("div", { class: "chart" }, [el("div", { class: "ttl", text: deviceLabel(a.device) + " · " + a.pool + " by role" }), box]));
      if (ss.length) memChart(box, ss, { steps: p.steps, marks: p.marks, series: ss, duration: r.duration_ns }, "mem", 230);
      const roles = [...new Set(Object.keys(a.peak).concat(Object.keys(a.end)))];
      const peakSum = Object.values(a.peak).reduce((x, y) => x + y, 0);
      b.append(el("h3", { text: "At the peak of " + a.pool + " on " + deviceLabel(a.device) + " and at the end" }),
        table([{ key: "role", label: "Role" }, bytesCol("peak", "At the peak"), { key: "share", label: "Share", num: true, sort: (x) => x.peak, fmt: (v, x) => (100 * x.peak / Math.max(1, peakSum)).toFixed(1) + "%" },
          bytesCol("end", "At the end")], roles.map((k) => ({ role: k, peak: a.peak[k] || 0, end: a.end[k] || 0 })), { sortKey: "peak" }));
      const act = R.activations.find((x) => same(x, a));
      if (act) {
        b.append(el("h3", { text: "Activations at their peak, by module (" + fmtBytes(act.total) + ")" }),
          table([{ key: "module", label: "Module", cls: "mono" }, bytesCol("bytes", "Bytes"),
            { key: "share", label: "Share", num: true, sort: (x) => x.bytes, fmt: (v, x) => (100 * x.bytes / Math.max(1, act.total)).toFixed(1) + "%" }],
          act.modules.map(([m, v]) => ({ module: m || "(no module)", bytes: v })), { sortKey: "bytes", page: 25 }));
      }
      const steps = R.steps.filter((s) => same(s, a));
      if (steps.length) {
        b.append(el("h3", { text: "Per step: the split at the highest and the lowest moment" }),
          table([{ key: "step", label: "Step", num: true }, bytesCol("high", "Highest"), { key: "high_roles", label: "Highest by role", sort: (x) => x.high, fmt: split },
            bytesCol("low", "Lowest"), { key: "low_roles", label: "Lowest by role", sort: (x) => x.low, fmt: split }], steps, { sortKey: "step", sortDir: 1, page: 50 }));
      }
    }
  }

  function fragChart(node, list, duration) {
    const data = alignSeries(list);
    const u = new uPlot({
      width: Math.max(320, (node.clientWidth || 900) - 4), height: 150,
      scales: { x: { time: false, min: 0, max: Math.max(1, duration) }, y: { range: [0, 1] } },
      axes: [{ values: (u, vals) => vals.map(fmtTime), space: 90 }, { values: (u, vals) => vals.map((v) => Math.round(100 * v) + "%"), size: 50 }],
      series: [{ label: "time", value: (u, v) => fmtTime(v) }].concat(list.map((s, i) => ({
        label: s.label, stroke: MS.ui.PALETTE[i % MS.ui.PALETTE.length], width: 1.6,
        paths: uPlot.paths.stepped({ align: 1 }), points: { show: false }, value: (u, v) => (v === null ? "—" : (100 * v).toFixed(2) + "%") }))),
      legend: { live: true },
    }, [data[0]].concat(data.slice(1).map((ys) => ys.map((v) => (v === null ? null : v / 1e6)))), node);
    node.setAttribute("data-series", String(list.length));
    node.setAttribute("data-points", String(data.slice(1).reduce((n, ys) => n + ys.filter((v) => v !== null).length, 0)));
    MS.ui.state.charts.push(u);
  }

  function renderFragmentation(p, r) {
    const { el, clear, body, memChart, card, deviceLabel } = MS.ui;
    const b = clear(body("fragmentation")), F = p.fragmentation;
    if (!F.series.length && !F.verdicts.length) {
      b.append(el("div", { class: "empty", text: "No framework-pool segment known: the pools' blocks lie in HAL blocks the run did not record (HAL rows come with the default adapters)." }));
      return;
    }
    b.append(el("div", { class: "note", text: "A pool's segments are the HAL blocks its blocks lie in; free = reserved − allocated, in extents between live blocks; fragmentation = 1 − largest / free. At an OOM: fragmentation (free ≥ the request, no extent large enough), held by other processes, or true shortage." }));
    for (const v of F.verdicts) {
      const dev = v.device_mem ? "device " + v.device + ": total " + fmtBytes(v.device_mem[0]) + ", free " + fmtBytes(v.device_mem[1]) + "; this process " + fmtBytes(v.process_held) + ", other processes " + fmtBytes(v.others || 0) : "device figures unknown";
      const holders = ["role", "owner", "frame"].map((k, i) => "by " + k + ": " + (v.holders[i].map(([n, x]) => n + " " + fmtBytes(x)).join("; ") || "—"));
      b.append(el("div", { class: "verdict", "data-kind": v.kind }, [card("OOM at " + fmtTime(v.t) + (v.step ? " (step " + v.step + ")" : ""), v.kind, v.headline, (v.kind === "fits in a free extent" || v.kind.startsWith("enough free bytes")) ? "" : "bad"),
        el("div", { class: "note", text: dev }), el("div", { class: "note", text: "Top holders " + holders.join(" · ") })]));
    }
    const pools = [...new Set(F.series.map((s) => s.device + "|" + s.pool))];
    for (const k of pools) {
      const [device, pool] = k.split("|");
      const mine = F.series.filter((s) => s.device === device && s.pool === pool);
      const levels = p.series.filter((s) => s.device === device && s.pool === pool).map((s) => Object.assign({ label: s.what, show: true, until: p.end }, s));
      const bytes = levels.concat(mine.filter((s) => s.what !== "fragmentation").map((s) => Object.assign({ label: s.what === "free" ? "free in segments" : "largest free extent", fill: s.what === "free", until: p.end }, s)));
      const box = el("div", { "data-frag": k }), fbox = el("div", { "data-frag-ratio": k });
      b.append(el("div", { class: "chart" }, [el("div", { class: "ttl", text: deviceLabel(device) + " · " + pool + ": reserved, allocated, free, largest free extent" }), box]),
        el("div", { class: "chart" }, [el("div", { class: "ttl", text: deviceLabel(device) + " · " + pool + ": fragmentation" }), fbox]));
      memChart(box, bytes, { steps: p.steps, marks: p.marks, series: bytes, duration: r.duration_ns }, "mem", 230);
      fragChart(fbox, mine.filter((s) => s.what === "fragmentation").map((s) => Object.assign({ label: "fragmentation", until: p.end }, s)), r.duration_ns);
    }
  }

  MS.sections.push(renderRoles, renderFragmentation);
})(typeof window !== "undefined" ? window : globalThis);
