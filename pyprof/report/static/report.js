// pyprof report: renders the embedded JSON (headline, views' tables, every GPU activity, timeline) into the
// page. No library, no network. Every string from the data goes through textContent or createTextNode, never
// innerHTML: kernel names carry "<", ">" and "&".
"use strict";
(function () {
  const DATA = JSON.parse(document.getElementById("pyprof-data").textContent);
  const SVG = "http://www.w3.org/2000/svg";  // a namespace name, not a resource: nothing is fetched
  const PAGE_ROWS = 100;  // rows of a view's table shown before "show all": keeps the DOM small
  const ROW_PX = 22;  // one row of the activities table (fixed: the table draws only the rows in view)
  const COLORS = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7",
                  "#9c755f", "#bab0ac", "#3d9970", "#85144b"];
  // The columns the filter box reads, and the columns whose values drill down to activities (view column ->
  // activities column).
  const FILTER_KEYS = ["op", "kernel", "line", "layer", "path", "about", "shapes", "source"];
  const DRILL = {op: "op", kernel: "kernel", line: "line", path: "layer"};
  const DIM_NAMES = {op: "Op", kernel: "Kernel", line: "Line", layer: "Layer"};
  // Sentences (a finding's evidence and action) wrap; other text is cut to fit, whole on hover.
  const WRAP_KEYS = ["evidence", "action", "advice", "about"];
  const fitters = [];
  function fit(wrap, table) {
    // Narrow the cut text columns until the table fits its box: the number columns stay on screen.
    let px = 420;
    table.style.setProperty("--tmax", px + "px");
    while (wrap.scrollWidth > wrap.clientWidth + 1 && px > 70) {
      px = Math.floor(px * 0.85);
      table.style.setProperty("--tmax", px + "px");
    }
  }

  function el(tag, attrs, text) {
    const e = document.createElement(tag);
    for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function svg(tag, attrs, text) {
    const e = document.createElementNS(SVG, tag);
    for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }

  // ---- numbers: one format per unit, so a column never mixes "0.0100" and "0.00450" --------------------
  const SI = [[1e18, "E"], [1e15, "P"], [1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"]];
  function decimals(key) {
    key = key || "";
    if (/_pct$/.test(key)) return 1;        // percentages to 0.1
    if (/_ms$/.test(key)) return 3;         // milliseconds to the microsecond
    if (/_us$/.test(key)) return 1;         // microseconds to 0.1
    if (/_mib$/.test(key)) return 1;        // MiB to 0.1
    if (key === "tflops") return 1;         // TFLOP/s to 0.1
    return null;
  }
  function siText(v) {
    const a = Math.abs(v);
    for (const [f, p] of SI) if (a >= f) return (v / f).toFixed(2) + " " + p;
    return String(Math.round(v));
  }
  function fmtv(v, key) {
    if (v === null || v === undefined) return "na";
    if (typeof v !== "number") return String(v);
    // A change (pyprof diff's delta_ columns) carries its sign either way.
    if (v > 0 && /^delta_/.test(key || "")) return "+" + fmtv(v, key.slice(5));  // "_ms": the unit decides the decimals
    if (key === "flops" || key === "bytes") return siText(v);  // exact value in the cell's title
    const d = decimals(key);
    if (d !== null) return v.toLocaleString("en-US", {minimumFractionDigits: d, maximumFractionDigits: d});
    if (Number.isInteger(v)) return v.toLocaleString("en-US");
    return v.toLocaleString("en-US", {minimumFractionDigits: 1, maximumFractionDigits: 1});
  }
  const fmt = v => fmtv(v, "");
  function isNumCol(rows, i) {
    let any = false;
    for (const r of rows) {
      const v = r[i];
      if (v === null || v === undefined) continue;
      if (typeof v !== "number") return false;
      any = true;
    }
    return any;
  }
  function short(s, n) { s = String(s); return s.length > n ? s.slice(0, n - 1) + "\u2026" : s; }
  // Paths and call sites say the most at their end (file:line): cut them at the front.
  function tail(s, n) { s = String(s); return s.length > n ? "\u2026" + s.slice(s.length - n + 1) : s; }

  // ---- the filter box ------------------------------------------------------------------------------------
  let query = "";
  const listeners = [];
  function onFilter(f) { listeners.push(f); }
  function hit(v) { return v !== null && v !== undefined && String(v).toLowerCase().includes(query); }
  // A view's columns the filter box reads (its op, kernel, line, layer ...), and whether a row passes: a table
  // without such a column is not filtered, nor is its chart.
  function filterCols(t) { return t.columns.map((c, i) => FILTER_KEYS.includes(c) ? i : -1).filter(i => i >= 0); }
  function passes(r, cols) { return !query || !cols.length || cols.some(i => hit(r[i])); }

  // ---- every GPU activity: columns, lookups, drill-down constraints -----------------------------------------
  const A = DATA.activities || null;
  const AN = A ? A.n : 0;
  function stringsMatching(col, pred) {
    const s = A.strings[col], ok = new Uint8Array(s.length);
    for (let i = 0; i < s.length; i++) ok[i] = pred(s[i]) ? 1 : 0;
    return ok;
  }
  function constraintTest(c) {
    // A drill step as a per-string test of its activities column: a line matches by its end (a worker's
    // table may shorten paths from another folder), a layer with the layers inside it.
    const v = String(c.value);
    if (c.col === "line") return s => s === v || s.endsWith("/" + v) || v.endsWith("/" + s);
    if (c.col === "layer") return v === "(no layer)" ? (s => s === "-") : (s => s === v || s.startsWith(v + "/"));
    return s => s === v;
  }
  function selectActivities(path, useQuery) {
    // Indices of the activities meeting every drill step (and the filter box): one pass over the id columns.
    const tests = path.map(c => [A[c.col], stringsMatching(c.col, constraintTest(c))]);
    let q = null;
    if (useQuery && query) q = ["kernel", "op", "line", "layer"].map(c => [A[c], stringsMatching(c, hit)]);
    const out = [];
    outer: for (let i = 0; i < AN; i++) {
      for (const [ids, ok] of tests) if (!ok[ids[i]]) continue outer;
      if (q) {
        let any = false;
        for (const [ids, ok] of q) if (ok[ids[i]]) { any = true; break; }
        if (!any) continue;
      }
      out.push(i);
    }
    return out;
  }
  let totalMs = 0;
  if (A) for (let i = 0; i < AN; i++) totalMs += A.dur_us[i] / 1000;

  // ---- drill-down: op -> its kernels -> their lines, and back ----------------------------------------------
  let drillPath = [];
  const DRILL_ROWS = 200;  // rows of each drill-down table (it scrolls); the rest are in the activities table
  const drillBox = document.getElementById("drill");
  function drillTo(path) {
    drillPath = path;
    showDrill();
    activities.setPath(drillPath);
    if (drillPath.length) drillBox.scrollIntoView({block: "start"});
  }
  function drillLink(col, value, text) {
    const b = el("button", {class: "drill", type: "button", title: "drill down: " + value, "data-drill": col});
    if (col === "line") {
      // A path says the most at its end (file:line): cut from the left, by the browser, to the room there is.
      b.classList.add("left-cut");
      b.appendChild(el("bdi", {dir: "ltr"}, text));
    } else {
      b.textContent = String(text);
    }
    b.addEventListener("click", () => {
      const path = drillPath.filter(c => c.col !== col);
      drillTo(path.concat([{col: col, value: String(value)}]));
    });
    return b;
  }
  function showDrill() {
    if (!A || !drillPath.length) { drillBox.style.display = "none"; drillBox.replaceChildren(); return; }
    drillBox.style.display = "";
    const idx = selectActivities(drillPath, true);
    let ms = 0, flops = 0;
    for (const i of idx) { ms += A.dur_us[i] / 1000; if (A.flops[i]) flops += A.flops[i]; }
    const crumbs = el("div", {class: "crumbs"});
    const all = el("button", {type: "button", class: "crumb"}, "\u2190 all activities");
    all.addEventListener("click", () => drillTo([]));
    crumbs.appendChild(all);
    drillPath.forEach((c, k) => {
      crumbs.appendChild(el("span", {class: "sep"}, "\u203a"));
      const b = el("button", {type: "button", class: "crumb"}, DIM_NAMES[c.col] + ": " + short(c.value, 80));
      b.title = c.value;
      b.addEventListener("click", () => drillTo(drillPath.slice(0, k + 1)));
      crumbs.appendChild(b);
    });
    const h = el("h2", {}, "Drill-down");
    const sum = el("p", {class: "drill-sum"}, idx.length.toLocaleString("en-US") + " GPU activities, " +
      fmtv(ms, "gpu_ms") + " ms (" + fmtv(totalMs ? 100 * ms / totalMs : null, "time_pct") + "% of GPU time)" +
      (flops ? ", " + siText(flops) + "FLOP, " + fmtv(ms ? flops / ms / 1e9 : null, "tflops") + " TFLOP/s" : "") +
      (query ? " \u00b7 filter: \u201c" + query + "\u201d" : ""));
    const show = el("button", {type: "button"}, "Show them in the activities table");
    show.addEventListener("click", () => document.getElementById("view-activities").scrollIntoView());
    const grid = el("div", {class: "drill-grid"});
    for (const dim of ["op", "kernel", "line", "layer"]) {
      if (drillPath.some(c => c.col === dim)) continue;
      const groups = new Map();
      for (const i of idx) {
        const id = A[dim][i];
        const g = groups.get(id) || {n: 0, ms: 0};
        g.n += 1; g.ms += A.dur_us[i] / 1000;
        groups.set(id, g);
      }
      const rows = [...groups.entries()].sort((a, b) => b[1].ms - a[1].ms);
      const box = el("div", {class: "drill-part", "data-dim": dim});
      box.appendChild(el("h3", {}, DIM_NAMES[dim] + "s (" + rows.length + ")"));
      const tb = el("table");
      const hr = el("tr");
      [DIM_NAMES[dim], "Activities", "Time (ms)", "Share %"].forEach((x, k) => hr.appendChild(el("th", {class: k ? "num" : "text"}, x)));
      tb.appendChild(el("thead")).appendChild(hr);
      const body = el("tbody");
      rows.slice(0, DRILL_ROWS).forEach(([id, g]) => {
        const tr = el("tr"), name = A.strings[dim][id];
        const td = el("td", {class: "text"});
        td.appendChild(drillLink(dim, name, dim === "line" ? name : short(name, 60)));
        tr.append(td, el("td", {class: "num"}, g.n.toLocaleString("en-US")), el("td", {class: "num"}, fmtv(g.ms, "gpu_ms")),
                  el("td", {class: "num"}, fmtv(ms ? 100 * g.ms / ms : null, "time_pct")));
        body.appendChild(tr);
      });
      tb.appendChild(body);
      const wrap = el("div", {class: "tablewrap drill-table"});
      wrap.appendChild(tb);
      box.appendChild(wrap);
      if (rows.length > DRILL_ROWS) box.appendChild(el("p", {class: "notes"}, (rows.length - DRILL_ROWS) + " more in the activities table"));
      grid.appendChild(box);
    }
    drillBox.replaceChildren(h, crumbs, sum, show, grid);
  }
  onFilter(showDrill);

  // ---- the views' tables ------------------------------------------------------------------------------------
  function renderTable(t, box) {
    const treeIdx = t.tree_column ? t.columns.indexOf(t.tree_column) : -1;
    const shown = t.columns.map((_, i) => i).filter(i => i !== treeIdx);
    const num = t.columns.map((_, i) => isNumCol(t.rows, i));
    const labelIdx = shown.find(i => !num[i]);  // the first text column carries the tree indentation
    const pathIdx = t.columns.indexOf("path");
    const filterIdx = filterCols(t);
    const state = {col: -1, dir: 0, all: false};
    const wrap = el("div", {class: "tablewrap"});
    const table = el("table", {"data-table": t.name});
    const thead = el("thead"), tbody = el("tbody"), hr = el("tr");
    shown.forEach(i => {
      const th = el("th", {class: num[i] ? "num" : "text", "data-col": t.columns[i]}, t.headers[i]);
      th.addEventListener("click", () => sortBy(i));
      hr.appendChild(th);
    });
    thead.appendChild(hr);
    table.append(thead, tbody);
    wrap.appendChild(table);
    const info = el("p", {class: "filtered"});
    box.append(wrap, info);
    const more = el("button", {class: "more", type: "button"});
    more.addEventListener("click", () => { state.all = true; draw(); });
    box.appendChild(more);

    function rows() {
      const idx = [];
      for (let k = 0; k < t.rows.length; k++) {
        if (!passes(t.rows[k], filterIdx)) continue;
        idx.push(k);
      }
      if (state.dir === 0) return idx;
      const i = state.col, s = state.dir;
      return idx.sort((a, b) => {
        const va = t.rows[a][i], vb = t.rows[b][i];
        const na = va === null || va === undefined, nb = vb === null || vb === undefined;
        if (na || nb) return na === nb ? a - b : (na ? 1 : -1);  // na last in both directions
        if (num[i]) return s * (va - vb) || a - b;
        return s * String(va).localeCompare(String(vb)) || a - b;
      });
    }
    function sortBy(i) {
      // Numbers sort largest first on the first click, text A-Z; the third click restores the view's order.
      const first = num[i] ? -1 : 1;
      if (state.col !== i) { state.col = i; state.dir = first; }
      else if (state.dir === first) state.dir = -first;
      else { state.dir = 0; state.col = -1; }
      draw();
    }
    function cell(r, i) {
      const v = r[i], key = t.columns[i];
      const td = el("td", {class: (num[i] ? "num" : "text") + (WRAP_KEYS.includes(key) ? " wrap" : "") +
                                  (v === null || v === undefined ? " na" : "")});
      if (typeof v === "number" && (key === "flops" || key === "bytes")) td.title = v.toLocaleString("en-US");
      // The row's label drills down: a layer by its path (the layers inside it with it), others by the value.
      let dcol = null, dval = v;
      if (A && i === labelIdx && v !== null && v !== undefined && v !== "-") {
        if (key === "layer" && pathIdx >= 0) { dcol = "layer"; dval = r[pathIdx]; }
        else if (DRILL[key]) dcol = DRILL[key];
      }
      if (dcol) td.appendChild(drillLink(dcol, dval, v));
      else td.textContent = fmtv(v, key);
      if (!num[i] && typeof v === "string" && v.length > 40) td.title = v;
      return td;
    }
    function draw() {
      const idx = rows();
      const n = state.all ? idx.length : Math.min(idx.length, PAGE_ROWS);
      const frag = document.createDocumentFragment();
      for (let k = 0; k < n; k++) {
        const r = t.rows[idx[k]], tr = el("tr");
        for (const i of shown) {
          const td = cell(r, i);
          if (i === labelIdx && treeIdx >= 0 && state.dir === 0 && !query)
            td.style.paddingLeft = (8 + 14 * (r[treeIdx] || 0)) + "px";
          tr.appendChild(td);
        }
        frag.appendChild(tr);
      }
      tbody.replaceChildren(frag);
      hr.querySelectorAll("th").forEach((th, k) => {
        if (shown[k] === state.col && state.dir) th.setAttribute("aria-sort", state.dir > 0 ? "ascending" : "descending");
        else th.removeAttribute("aria-sort");
      });
      more.textContent = "Show all " + idx.length.toLocaleString("en-US") + " rows";
      more.style.display = n < idx.length ? "" : "none";
      info.textContent = !query ? "" : filterIdx.length ?
        idx.length + " of " + t.rows.length + " rows match the filter" : "(this table is not filtered: it has no op, kernel, line or layer column)";
      info.style.display = query ? "" : "none";
      fit(wrap, table);
    }
    onFilter(draw);
    fitters.push(() => fit(wrap, table));
    draw();
  }

  // ---- charts: drawn to the section's width, redrawn when the window resizes --------------------------------
  const charts = [];
  function legend(names, colors) {
    const d = el("div", {class: "legend"});
    names.forEach((n, k) => {
      const s = el("span"); const i = el("i"); i.style.background = colors ? colors[k] : COLORS[k % COLORS.length];
      s.append(i, document.createTextNode(n)); d.appendChild(s);
    });
    return d;
  }
  function colIdx(t, key) { return t.columns.indexOf(key); }
  // The rows a chart draws: those the filter box leaves, as in the view's table.
  function chartRows(t) {
    const cols = filterCols(t);
    return t.rows.filter(r => passes(r, cols));
  }
  // One colour per name across the page (the same op has the same colour in every pie), in the order names are
  // first drawn; "other" is grey.
  const nameColors = new Map();
  function colorOfName(name) {
    if (name === "other") return "#bab0ac";
    if (!nameColors.has(name)) nameColors.set(name, COLORS[nameColors.size % COLORS.length]);
    return nameColors.get(name);
  }
  function val(v) { return typeof v === "number" && isFinite(v) && v > 0 ? v : 0; }
  function labelOf(t, r) {
    // A chart's label: one column, or several joined (op and input shapes: "linear [[8, 512], ...]").
    const keys = Array.isArray(t.chart.label) ? t.chart.label : [t.chart.label];
    return keys.map(k => r[colIdx(t, k)]).filter(v => v !== null && v !== undefined).map(String).join(" ");
  }
  function labelText(t, s, n) {
    const k = Array.isArray(t.chart.label) ? t.chart.label[0] : t.chart.label;
    return k === "line" ? tail(s, n) : short(s, n);
  }
  function widthOf(box) { return Math.max(box.clientWidth - 4, 320); }

  function stackedChart(t, box) {
    const vi = t.chart.values.map(k => colIdx(t, k)).filter(i => i >= 0);
    const wi = colIdx(t, "worker");
    let rows = chartRows(t);
    if (t.chart.top) {  // the longest rows (lines: forward + backward), not the first
      rows = rows.map(r => [r, vi.reduce((s, i) => s + val(r[i]), 0)]).filter(p => p[1] > 0)
        .sort((a, b) => b[1] - a[1]).slice(0, t.chart.top).map(p => p[0]);
    }
    rows = rows.slice(0, 40);
    const totals = rows.map(r => vi.reduce((s, i) => s + val(r[i]), 0));
    const max = Math.max(...totals, 1e-30), W = widthOf(box), H = 20;
    const L = Math.min(Math.round(W * 0.34), 360), chars = Math.floor(L / 6.6);
    const key = t.columns[vi[0]];
    box.appendChild(legend(vi.map(i => t.headers[i])));
    const g = svg("svg", {width: W, height: rows.length * H + 4, class: "chart", "data-chart": "stacked"});
    rows.forEach((r, k) => {
      // With several workers the same step name repeats: the worker column tells the bars apart.
      const who = wi >= 0 && r[wi] !== null ? short(r[wi], 14) + " " : "";
      const full = labelOf(t, r);
      const lab = svg("text", {x: L - 6, y: k * H + 14, "text-anchor": "end"}, who + labelText(t, full, chars - who.length));
      lab.appendChild(svg("title", {}, full));
      g.appendChild(lab);
      let x = L;
      vi.forEach((i, c) => {
        const w = val(r[i]) / max * (W - L - 80);
        if (w <= 0) return;
        const rect = svg("rect", {x: x, y: k * H + 3, width: w, height: H - 6, fill: COLORS[c % COLORS.length]});
        rect.appendChild(svg("title", {}, full + "\n" + t.headers[i] + ": " + fmtv(r[i], t.columns[i])));
        g.appendChild(rect); x += w;
      });
      g.appendChild(svg("text", {x: x + 4, y: k * H + 14}, fmtv(totals[k], key)));
    });
    box.appendChild(g);
  }
  function topRows(t, vi) {
    return chartRows(t).map(r => [r, val(r[vi])]).filter(p => p[1] > 0).sort((a, b) => b[1] - a[1]);
  }
  function barChart(t, box) {
    const vi = colIdx(t, t.chart.values[0]), key = t.chart.values[0];
    const top = topRows(t, vi).slice(0, 12);
    const W = widthOf(box), H = 20, max = top.length ? top[0][1] : 1;
    const L = Math.min(Math.round(W * 0.4), 440), chars = Math.floor(L / 6.6);
    box.appendChild(el("div", {class: "legend"}, "Top " + top.length + " by " + t.headers[vi]));
    const g = svg("svg", {width: W, height: top.length * H + 4, class: "chart", "data-chart": "bar"});
    top.forEach(([r, v], k) => {
      const full = labelOf(t, r);
      const lab = svg("text", {x: L - 6, y: k * H + 14, "text-anchor": "end"}, labelText(t, full, chars));
      lab.appendChild(svg("title", {}, full));
      const w = Math.max(v / max * (W - L - 90), 1);
      const rect = svg("rect", {x: L, y: k * H + 3, width: w, height: H - 6, fill: COLORS[0]});
      rect.appendChild(svg("title", {}, full + ": " + fmtv(v, key)));
      g.append(lab, rect, svg("text", {x: L + w + 4, y: k * H + 14}, fmtv(v, key)));
    });
    box.appendChild(g);
  }
  function pieChart(t, box) {
    const vi = colIdx(t, t.chart.values[0]), key = t.chart.values[0];
    const all = topRows(t, vi), top = all.slice(0, 8);
    const rest = all.slice(8).reduce((s, p) => s + p[1], 0);
    const parts = top.map(([r, v]) => [labelOf(t, r), v]);
    if (rest > 0) parts.push(["other", rest]);
    const total = parts.reduce((s, p) => s + p[1], 0) || 1, R = 90;
    // Pie and legend side by side: a legend above a small pie leaves most of the section empty.
    const row = el("div", {class: "pierow"});
    const g = svg("svg", {width: 2 * R + 10, height: 2 * R + 10, class: "chart", "data-chart": "pie"});
    const lg = legend(parts.map(p => short(p[0], 70) + " (" + (100 * p[1] / total).toFixed(1) + "%)"),
                      parts.map(p => colorOfName(p[0])));
    lg.classList.add("vertical");
    row.append(g, lg);
    box.appendChild(row);
    let a = -Math.PI / 2;
    parts.forEach(([name, v], k) => {
      const b = a + 2 * Math.PI * v / total, big = b - a > Math.PI ? 1 : 0;
      const p = (ang) => (R + 5 + R * Math.cos(ang)).toFixed(2) + " " + (R + 5 + R * Math.sin(ang)).toFixed(2);
      const d = parts.length === 1 ? `M ${R + 5} 5 A ${R} ${R} 0 1 1 ${R + 4.99} 5 Z`
                                   : `M ${R + 5} ${R + 5} L ${p(a)} A ${R} ${R} 0 ${big} 1 ${p(b)} Z`;
      const path = svg("path", {d: d, fill: colorOfName(name), stroke: "#fff"});
      path.appendChild(svg("title", {}, name + ": " + fmtv(v, key)));
      g.appendChild(path); a = b;
    });
  }
  function seriesChart(t, box) {
    // Totals over time (memory): one small chart per series, a step line per total; hover tells time and value.
    const W = widthOf(box), H = 160, L = 64, B = 22, unit = t.chart.unit || "";
    for (const s of t.chart.series) {
      const names = Object.keys(s.lines);
      if (!s.t_ms.length || !names.length) continue;
      box.appendChild(legend(names.map(n => s.label + ": " + n + " (" + unit + ")")));
      const tmax = Math.max(s.t_ms[s.t_ms.length - 1], 1e-9);
      const vmax = Math.max(...names.map(n => Math.max(...s.lines[n])), 1e-9);
      const X = (v) => L + v / tmax * (W - L - 10), Y = (v) => 6 + (1 - v / vmax) * (H - B - 6);
      const g = svg("svg", {width: W, height: H, class: "chart", "data-chart": "series"});
      g.appendChild(svg("line", {x1: L, y1: H - B, x2: W - 10, y2: H - B, stroke: "#999"}));
      g.appendChild(svg("text", {x: L - 4, y: 14, "text-anchor": "end"}, vmax.toFixed(0)));
      g.appendChild(svg("text", {x: L - 4, y: H - B, "text-anchor": "end"}, "0"));
      g.appendChild(svg("text", {x: W - 10, y: H - 6, "text-anchor": "end"}, tmax.toFixed(1) + " ms"));
      names.forEach((n, c) => {
        const v = s.lines[n];
        let d = "M " + X(s.t_ms[0]).toFixed(1) + " " + Y(v[0]).toFixed(1);
        for (let k = 1; k < v.length; k++) d += " H " + X(s.t_ms[k]).toFixed(1) + " V " + Y(v[k]).toFixed(1);
        const path = svg("path", {d: d, fill: "none", stroke: COLORS[c % COLORS.length], "stroke-width": 1.5});
        const top = v.indexOf(Math.max(...v));
        path.appendChild(svg("title", {}, n + ": peak " + v[top].toFixed(1) + " " + unit + " at " + s.t_ms[top].toFixed(3) + " ms"));
        g.appendChild(path);
      });
      box.appendChild(g);
    }
  }
  const CHARTS = {stacked: stackedChart, bar: barChart, pie: pieChart, series: seriesChart};
  function chart(t, sec) {
    const box = el("div", {class: "chartbox"});
    sec.appendChild(box);
    const draw = () => { box.replaceChildren(); CHARTS[t.chart.type](t, box); };
    charts.push(draw);
    onFilter(draw);
    draw();
  }

  // ---- views, navigation, workers -----------------------------------------------------------------------------
  const main = document.getElementById("views"), nav = document.getElementById("nav");
  const names = [];
  for (const t of DATA.tables) if (!names.includes(t.name)) names.push(t.name);
  const workers = [...new Set(DATA.tables.map(t => t.worker).filter(w => w !== null && w !== undefined))];

  function renderViews(worker) {
    main.replaceChildren();
    nav.replaceChildren();
    listeners.length = 0;
    charts.length = 0;
    fitters.length = 0;
    onFilter(showDrill);
    onFilter(() => activities.refilter());
    if (DATA.headline) nav.appendChild(el("a", {href: "#headline"}, "Headline"));
    if (DATA.timeline) nav.appendChild(el("a", {href: "#trace"}, "Timeline"));
    for (const name of names) {
      const mine = DATA.tables.filter(t => t.name === name);
      // A view without a table for this worker shows its all-workers table, labelled so.
      const t = mine.find(x => x.worker !== null && String(x.worker) === worker) ||
        mine.find(x => x.worker === null) || mine[0];
      const sec = el("section", {id: "view-" + name, "data-view": name});
      main.appendChild(sec);  // first, so that charts know their width
      const h = el("h2", {}, t.title);
      if (workers.length) h.appendChild(el("span", {class: "worker"}, t.worker === null ? "all workers" : "worker " + t.worker));
      sec.appendChild(h);
      if (t.chart && CHARTS[t.chart.type] && t.rows.length) chart(t, sec);
      if (!t.rows.length && t.empty) sec.appendChild(el("p", {class: "empty"}, t.empty));
      renderTable(t, sec);
      if (t.notes && t.notes.length) {
        const ul = el("ul", {class: "notes"});
        t.notes.forEach(n => ul.appendChild(el("li", {}, n)));
        sec.appendChild(ul);
      }
      nav.appendChild(el("a", {href: "#view-" + name}, t.title));
    }
    if (A) nav.appendChild(el("a", {href: "#view-activities"}, "Every GPU activity"));
  }

  // ---- the headline ---------------------------------------------------------------------------------------------
  function renderHeadline() {
    const H = DATA.headline, box = document.getElementById("headline");
    if (!H) { box.style.display = "none"; return; }
    const cards = el("div", {class: "cards"});
    function card(label, value, sub) {
      const c = el("div", {class: "card"});
      c.append(el("div", {class: "label"}, label), el("div", {class: "value"}, value));
      if (sub) c.appendChild(el("div", {class: "sub"}, sub));
      cards.appendChild(c);
    }
    // a step is a forward where the program timed each forward (an inference loop); older pages' data say nothing
    const unit = H.unit || "step", Unit = unit[0].toUpperCase() + unit.slice(1);
    card(Unit + " time", H.step_ms === null ? "na" : fmtv(H.step_ms, "step_ms") + " ms",
         H.steps ? "mean of " + H.steps + " " + unit + (H.steps === 1 ? "" : "s") : "no steps found");
    // the program's own step, timed with nothing of the capture on (pyprof run); absent in older pages' data
    if (H.program_step_ms !== null && H.program_step_ms !== undefined)
      card("Program " + unit, fmtv(H.program_step_ms, "step_ms") + " ms",
           "unprofiled; captured " + fmtv(H.captured_step_ms, "step_ms") + " ms: the capture inflated it " +
           H.inflation + "x" + (unit === "forward" ? "; a decode forward's is the time per output token" : ""));
    else
      card("Program " + unit, "na", "not measured: the " + unit + " above includes the capture's own cost");
    card("GPU busy", H.gpu_busy_pct === null ? "na" : fmtv(H.gpu_busy_pct, "busy_pct") + "%",
         "of the steps' time; idle the rest");
    card("GPU time", fmtv(H.gpu_ms, "gpu_ms") + " ms", H.activities.toLocaleString("en-US") + " GPU activities");
    card("FLOPs modelled", H.flops_pct === null ? "na" : fmtv(H.flops_pct, "flops_pct") + "%",
         "of GPU time; FLOPs and bytes: " + (H.modelled_pct === null ? "na" : fmtv(H.modelled_pct, "m_pct") + "%"));
    const lists = el("div", {class: "lists"});
    function list(title, entries, col, extra) {
      const d = el("div", {class: "hl-list"});
      d.appendChild(el("h3", {}, title));
      const ol = el("ol");
      for (const e of entries) {
        const li = el("li");
        if (col && A) li.appendChild(drillLink(col, e.label, col === "line" ? e.label : short(e.label, 60)));
        else li.appendChild(el("span", {class: "what"}, short(e.label, 90)));
        li.appendChild(el("span", {class: "num"}, " " + fmtv(e.ms, "x_ms") + " ms" +
                                                  (e.pct !== null && e.pct !== undefined ? " \u00b7 " + fmtv(e.pct, "x_pct") + "%" : "")));
        if (extra) extra(li, e);
        ol.appendChild(li);
      }
      if (!entries.length) ol.appendChild(el("li", {class: "na"}, "none"));
      d.appendChild(ol);
      lists.appendChild(d);
    }
    list("Where the time goes: ops", H.top_ops, "op");
    list("Where the time goes: lines (call sites)", H.top_lines, "line", (li, e) => { if (e.detail) li.appendChild(el("code", {}, short(e.detail.trim(), 80))); });
    list("Top findings", H.findings, null, (li, e) => {
      if (e.saving_ms !== null && e.saving_ms !== undefined) li.appendChild(el("span", {class: "saving"}, " saves up to " + fmtv(e.saving_ms, "s_ms") + " ms"));
      if (e.detail) li.appendChild(el("div", {class: "ev"}, short(e.detail, 200)));
    });
    box.replaceChildren(el("h2", {}, "Headline"), cards, lists);
  }

  // ---- every GPU activity: a virtual table (only the rows in view are in the DOM) ----------------------------
  const activities = (function () {
    const sec = document.getElementById("view-activities");
    const noop = {setPath() {}, refilter() {}};
    if (!A) { sec.style.display = "none"; return noop; }
    const cols = A.columns.filter(c => c !== "worker" || A.strings.worker.length > 1);
    const TEXT = new Set(["kernel", "op", "dir", "line", "layer", "worker"]);
    const head = el("h2", {}, "Every GPU activity (" + AN.toLocaleString("en-US") + ")");
    const info = el("p", {class: "filtered", id: "activities-info"});
    const scroller = el("div", {class: "vscroll", tabindex: "0"});
    const table = el("table", {"data-table": "activities"});
    const thead = el("thead"), tbody = el("tbody"), hr = el("tr");
    const state = {col: null, dir: 0, order: null, path: []};
    cols.forEach(c => {
      const th = el("th", {class: TEXT.has(c) ? "text" : "num", "data-col": c}, A.headers[A.columns.indexOf(c)]);
      th.addEventListener("click", () => sortBy(c));
      hr.appendChild(th);
    });
    thead.appendChild(hr);
    // A fixed layout: column widths do not follow the rows in view, so scrolling never shifts them.
    const WIDTH = {start_ms: 7, dur_us: 7, kernel: 19, op: 12, dir: 5, line: 12, layer: 11, flops: 7, bytes: 7,
                   tflops: 6, roofline_pct: 6, tc: 4, worker: 8};
    const colgroup = el("colgroup");
    cols.forEach(c => { const cg = el("col"); cg.style.width = (WIDTH[c] || 8) + "%"; colgroup.appendChild(cg); });
    table.classList.add("fixed");
    table.append(colgroup, thead, tbody);
    scroller.appendChild(table);
    sec.append(head, info, scroller,
               el("p", {class: "notes"}, "One row per kernel, copy and memset, in GPU start order; click a header to sort, " +
                  "an op, kernel, line or layer to drill down. Start is from the first activity. TFLOP/s and roofline are " +
                  "the activity's share of its op call's FLOPs over its own duration; na where nothing is modelled."));
    const MAX_PX = 3e7;  // browsers cap an element's height near 3.3e7 px: past that, rows map onto the scroll range
    function rank(col) {
      // Sorting text: each string id's rank in the sorted strings, computed once per column.
      const s = A.strings[col], order = s.map((_, i) => i).sort((a, b) => s[a].localeCompare(s[b]));
      const r = new Int32Array(s.length);
      order.forEach((id, k) => { r[id] = k; });
      return r;
    }
    const ranks = {};
    function refilter() {
      const sel = selectActivities(state.path, true);
      let order = Int32Array.from(sel);
      if (state.col && state.dir) {
        const c = state.col, s = state.dir;
        let key;
        if (TEXT.has(c)) { const r = ranks[c] || (ranks[c] = rank(c)); const ids = A[c]; key = i => r[ids[i]]; }
        else { const v = A[c]; key = i => (v[i] === null || v[i] === undefined ? null : v[i]); }
        const keys = new Float64Array(AN);
        for (const i of order) { const k = key(i); keys[i] = k === null ? NaN : k; }
        order.sort((a, b) => {
          const ka = keys[a], kb = keys[b], na = ka !== ka, nb = kb !== kb;
          if (na || nb) return na === nb ? a - b : (na ? 1 : -1);
          return s * (ka - kb) || a - b;
        });
      }
      state.order = order;
      const bits = state.path.map(c => DIM_NAMES[c.col] + " = " + c.value);
      if (query) bits.push("filter \u201c" + query + "\u201d");
      info.textContent = bits.length ? order.length.toLocaleString("en-US") + " of " + AN.toLocaleString("en-US") +
        " activities: " + bits.join(", ") : "";
      info.style.display = bits.length ? "" : "none";
      scroller.scrollTop = 0;
      draw();
    }
    function sortBy(c) {
      const first = TEXT.has(c) ? 1 : -1;
      if (state.col !== c) { state.col = c; state.dir = first; }
      else if (state.dir === first) state.dir = -first;
      else { state.col = null; state.dir = 0; }
      hr.querySelectorAll("th").forEach(th => {
        if (th.getAttribute("data-col") === state.col && state.dir) th.setAttribute("aria-sort", state.dir > 0 ? "ascending" : "descending");
        else th.removeAttribute("aria-sort");
      });
      refilter();
    }
    function value(c, i) {
      if (TEXT.has(c)) return A.strings[c][A[c][i]];
      if (c === "tc") return A.tc[i] === null ? null : (A.tc[i] ? "yes" : "no");
      return A[c][i];
    }
    function draw() {
      const order = state.order, n = order.length;
      const full = n * ROW_PX, virt = Math.min(full, MAX_PX);
      const view = scroller.clientHeight || 520;
      const rowsInView = Math.ceil(view / ROW_PX) + 2;
      // Top row: exact while the table fits the browser's height cap, else the scroll position's share.
      const top = full <= MAX_PX ? Math.floor(scroller.scrollTop / ROW_PX)
        : Math.floor(scroller.scrollTop / Math.max(virt - view, 1) * Math.max(n - rowsInView + 2, 0));
      const first = Math.max(0, Math.min(top, n - 1)), last = Math.min(n, first + rowsInView);
      const frag = document.createDocumentFragment();
      const padTop = full <= MAX_PX ? first * ROW_PX : Math.min(scroller.scrollTop, virt - (last - first) * ROW_PX);
      const spacer = el("tr", {class: "spacer"}); spacer.style.height = Math.max(padTop, 0) + "px";
      frag.appendChild(spacer);
      for (let k = first; k < last; k++) {
        const i = order[k], tr = el("tr", {"data-i": i});
        for (const c of cols) {
          const v = value(c, i);
          const td = el("td", {class: (TEXT.has(c) ? "text" : "num") + (v === null || v === undefined ? " na" : "")});
          const dim = c === "layer" ? "layer" : (DRILL[c] && c !== "path" ? c : null);
          if (dim && v !== "-" && v !== null) td.appendChild(drillLink(dim, v, c === "line" ? v : short(v, 60)));
          else td.textContent = fmtv(v, c);
          if (typeof v === "string" && v.length > 40) td.title = v;
          if ((c === "flops" || c === "bytes") && typeof v === "number") td.title = v.toLocaleString("en-US");
          tr.appendChild(td);
        }
        frag.appendChild(tr);
      }
      const bottom = el("tr", {class: "spacer"});
      bottom.style.height = Math.max(virt - padTop - (last - first) * ROW_PX, 0) + "px";
      frag.appendChild(bottom);
      tbody.replaceChildren(frag);
    }
    let pending = false;
    scroller.addEventListener("scroll", () => {
      if (!pending) { pending = true; requestAnimationFrame(() => { pending = false; draw(); }); }
    });
    state.order = Int32Array.from({length: AN}, (_, i) => i);
    draw();
    return {setPath(p) { state.path = p; refilter(); }, refilter: refilter};
  })();

  if (workers.length) {
    const sel = document.getElementById("worker");
    sel.appendChild(el("option", {value: ""}, "All workers"));
    workers.forEach(w => sel.appendChild(el("option", {value: w}, "Worker " + w)));
    sel.style.display = "";
    sel.addEventListener("change", () => renderViews(sel.value === "" ? null : sel.value));
  }
  renderHeadline();
  renderViews(null);
  const box = document.getElementById("filter");
  let timer = null;
  box.addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(() => { query = box.value.trim().toLowerCase(); listeners.forEach(f => f()); }, 150);
  });
  let resizeTimer = null;
  window.addEventListener("resize", () => {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(() => { charts.forEach(d => d()); fitters.forEach(f => f()); }, 150);
  });
  if (window.pyprofTimeline) window.pyprofTimeline(DATA, {el, svg, fmt, fmtv, COLORS});
  window.pyprofReport = {drillTo: drillTo};  // for the console: pyprofReport.drillTo([{col: "op", value: "linear"}])
})();
