// pyprof report: renders the embedded JSON (tables, timeline) into the page. No library, no network.
// Every string from the data goes through textContent or createTextNode, never innerHTML: kernel names
// carry "<", ">" and "&".
"use strict";
(function () {
  const DATA = JSON.parse(document.getElementById("pyprof-data").textContent);
  const SVG = "http://www.w3.org/2000/svg";  // a namespace name, not a resource: nothing is fetched
  const PAGE_ROWS = 100;  // rows shown before "show all": keeps the DOM small for long tables
  const COLORS = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7",
                  "#9c755f", "#bab0ac", "#3d9970", "#85144b"];

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
  function fmt(v) {
    if (v === null || v === undefined) return "na";
    if (typeof v !== "number") return String(v);
    if (Number.isInteger(v)) return v.toLocaleString("en-US");
    const a = Math.abs(v);
    if (a >= 1000) return v.toLocaleString("en-US", {maximumFractionDigits: 1});
    if (a >= 1) return v.toFixed(2);
    return a === 0 ? "0" : v.toPrecision(3);
  }
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

  // ---- tables -------------------------------------------------------------------------------------
  function renderTable(t, box) {
    const treeIdx = t.tree_column ? t.columns.indexOf(t.tree_column) : -1;
    const shown = t.columns.map((_, i) => i).filter(i => i !== treeIdx);
    const num = t.columns.map((_, i) => isNumCol(t.rows, i));
    // The first text column carries the tree indentation.
    const labelIdx = shown.find(i => !num[i]);
    const state = {col: -1, dir: 0, all: t.rows.length <= PAGE_ROWS};
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
    box.appendChild(wrap);
    const more = el("button", {class: "more"});
    more.addEventListener("click", () => { state.all = true; draw(); });
    box.appendChild(more);

    function order() {
      const idx = t.rows.map((_, k) => k);
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
    function draw() {
      const idx = order();
      const n = state.all ? idx.length : Math.min(idx.length, PAGE_ROWS);
      const frag = document.createDocumentFragment();
      for (let k = 0; k < n; k++) {
        const r = t.rows[idx[k]], tr = el("tr");
        for (const i of shown) {
          const v = r[i];
          const td = el("td", {class: (num[i] ? "num" : "text") + (v === null || v === undefined ? " na" : "")},
                        fmt(v));
          if (i === labelIdx && treeIdx >= 0 && state.dir === 0) td.style.paddingLeft = (8 + 16 * (r[treeIdx] || 0)) + "px";
          if (!num[i] && typeof v === "string" && v.length > 60) td.title = v;
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
    }
    draw();
  }

  // ---- charts ---------------------------------------------------------------------------------------
  function legend(names) {
    const d = el("div", {class: "legend"});
    names.forEach((n, k) => {
      const s = el("span"); const i = el("i"); i.style.background = COLORS[k % COLORS.length];
      s.append(i, document.createTextNode(n)); d.appendChild(s);
    });
    return d;
  }
  function short(s, n) { s = String(s); return s.length > n ? s.slice(0, n - 1) + "\u2026" : s; }
  // Paths and call sites say the most at their end (file:line): cut them at the front.
  function tail(s, n) { s = String(s); return s.length > n ? "\u2026" + s.slice(s.length - n + 1) : s; }
  function colIdx(t, key) { return t.columns.indexOf(key); }
  function val(v) { return typeof v === "number" && isFinite(v) && v > 0 ? v : 0; }

  function stackedChart(t, box) {
    const li = colIdx(t, t.chart.label), vi = t.chart.values.map(k => colIdx(t, k)).filter(i => i >= 0);
    const rows = t.rows.slice(0, 40), wi = colIdx(t, "worker");
    const totals = rows.map(r => vi.reduce((s, i) => s + val(r[i]), 0));
    const max = Math.max(...totals, 1e-30), W = 900, L = wi >= 0 ? 250 : 150, H = 20;
    box.appendChild(legend(vi.map(i => t.headers[i])));
    const g = svg("svg", {width: W, height: rows.length * H + 4, class: "chart", "data-chart": "stacked"});
    rows.forEach((r, k) => {
      // With several workers the same step name repeats: the worker column tells the bars apart.
      const who = wi >= 0 && wi !== li && r[wi] !== null ? short(r[wi], 14) + " " : "";
      g.appendChild(svg("text", {x: L - 6, y: k * H + 14, "text-anchor": "end"}, who + short(fmt(r[li]), 22)));
      let x = L;
      vi.forEach((i, c) => {
        const w = val(r[i]) / max * (W - L - 70);
        if (w <= 0) return;
        const rect = svg("rect", {x: x, y: k * H + 3, width: w, height: H - 6, fill: COLORS[c % COLORS.length]});
        rect.appendChild(svg("title", {}, t.headers[i] + ": " + fmt(r[i])));
        g.appendChild(rect); x += w;
      });
      g.appendChild(svg("text", {x: x + 4, y: k * H + 14}, fmt(totals[k])));
    });
    box.appendChild(g);
  }
  function topRows(t, vi) {
    return t.rows.map(r => [r, val(r[vi])]).filter(p => p[1] > 0).sort((a, b) => b[1] - a[1]);
  }
  function barChart(t, box) {
    const li = colIdx(t, t.chart.label), vi = colIdx(t, t.chart.values[0]);
    const top = topRows(t, vi).slice(0, 12);
    const W = 900, L = 320, H = 20, max = top.length ? top[0][1] : 1;
    box.appendChild(el("div", {class: "legend"}, "Top " + top.length + " by " + t.headers[vi]));
    const g = svg("svg", {width: W, height: top.length * H + 4, class: "chart", "data-chart": "bar"});
    top.forEach(([r, v], k) => {
      const lab = svg("text", {x: L - 6, y: k * H + 14, "text-anchor": "end"},
                      t.chart.label === "line" ? tail(r[li], 48) : short(r[li], 48));
      lab.appendChild(svg("title", {}, String(r[li])));
      const w = Math.max(v / max * (W - L - 90), 1);
      const rect = svg("rect", {x: L, y: k * H + 3, width: w, height: H - 6, fill: COLORS[0]});
      rect.appendChild(svg("title", {}, String(r[li]) + ": " + fmt(v)));
      g.append(lab, rect, svg("text", {x: L + w + 4, y: k * H + 14}, fmt(v)));
    });
    box.appendChild(g);
  }
  function pieChart(t, box) {
    const li = colIdx(t, t.chart.label), vi = colIdx(t, t.chart.values[0]);
    const all = topRows(t, vi), top = all.slice(0, 8);
    const rest = all.slice(8).reduce((s, p) => s + p[1], 0);
    const parts = top.map(([r, v]) => [String(r[li]), v]);
    if (rest > 0) parts.push(["other", rest]);
    const total = parts.reduce((s, p) => s + p[1], 0) || 1, R = 90;
    // Pie and legend side by side: a legend above a small pie leaves most of the section empty.
    const row = el("div", {class: "pierow"});
    const g = svg("svg", {width: 2 * R + 10, height: 2 * R + 10, class: "chart", "data-chart": "pie"});
    const lg = legend(parts.map(p => short(p[0], 70) + " (" + (100 * p[1] / total).toFixed(1) + "%)"));
    lg.classList.add("vertical");
    row.append(g, lg);
    box.appendChild(row);
    let a = -Math.PI / 2;
    parts.forEach(([name, v], k) => {
      const b = a + 2 * Math.PI * v / total, big = b - a > Math.PI ? 1 : 0;
      const p = (ang) => (R + 5 + R * Math.cos(ang)).toFixed(2) + " " + (R + 5 + R * Math.sin(ang)).toFixed(2);
      const d = parts.length === 1 ? `M ${R + 5} 5 A ${R} ${R} 0 1 1 ${R + 4.99} 5 Z`
                                   : `M ${R + 5} ${R + 5} L ${p(a)} A ${R} ${R} 0 ${big} 1 ${p(b)} Z`;
      const path = svg("path", {d: d, fill: COLORS[k % COLORS.length], stroke: "#fff"});
      path.appendChild(svg("title", {}, name + ": " + fmt(v)));
      g.appendChild(path); a = b;
    });
  }
  const CHARTS = {stacked: stackedChart, bar: barChart, pie: pieChart};

  // ---- views, navigation, workers ---------------------------------------------------------------------
  const main = document.getElementById("views"), nav = document.getElementById("nav");
  const names = [];
  for (const t of DATA.tables) if (!names.includes(t.name)) names.push(t.name);
  const workers = [...new Set(DATA.tables.map(t => t.worker).filter(w => w !== null && w !== undefined))];

  function renderViews(worker) {
    main.replaceChildren();
    nav.replaceChildren();
    for (const name of names) {
      const mine = DATA.tables.filter(t => t.name === name);
      // A view without a table for this worker shows its all-workers table, labelled so.
      const t = mine.find(x => x.worker !== null && String(x.worker) === worker) ||
        mine.find(x => x.worker === null) || mine[0];
      const sec = el("section", {id: "view-" + name, "data-view": name});
      const h = el("h2", {}, t.title);
      if (workers.length) h.appendChild(el("span", {class: "worker"}, t.worker === null ? "all workers" : "worker " + t.worker));
      sec.appendChild(h);
      if (t.chart && CHARTS[t.chart.type] && t.rows.length) CHARTS[t.chart.type](t, sec);
      renderTable(t, sec);
      if (t.notes && t.notes.length) {
        const ul = el("ul", {class: "notes"});
        t.notes.forEach(n => ul.appendChild(el("li", {}, n)));
        sec.appendChild(ul);
      }
      main.appendChild(sec);
      nav.appendChild(el("a", {href: "#view-" + name}, t.title));
    }
    if (DATA.timeline) nav.appendChild(el("a", {href: "#trace"}, "Trace"));
  }
  if (workers.length) {
    const sel = document.getElementById("worker");
    sel.appendChild(el("option", {value: ""}, "All workers"));
    workers.forEach(w => sel.appendChild(el("option", {value: w}, "Worker " + w)));
    sel.style.display = "";
    sel.addEventListener("change", () => renderViews(sel.value === "" ? null : sel.value));
  }
  renderViews(null);
  if (window.pyprofTimeline) window.pyprofTimeline(DATA, {el, svg, fmt, COLORS});
})();
