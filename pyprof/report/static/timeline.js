// pyprof report: the timeline of the first activities as one SVG, page-wide: GPU streams, then each CPU thread
// with its ranges (steps, layers, ops) nested above its launch calls, one lane per depth. Redrawn for the
// visible window only, so zooming stays fast with tens of thousands of events.
"use strict";
window.pyprofTimeline = function (DATA, u) {
  const T = DATA.timeline;
  if (!T) return;
  const box = document.getElementById("trace-body");
  const S = 6;  // flat [row, ts_us, dur_us, name, tip, lane] per event
  const N = T.ev.length / S;
  let end = 0;
  for (let k = 0; k < N; k++) end = Math.max(end, T.ev[S * k + 1] + T.ev[S * k + 2]);
  const LANE = 16, AXIS = 22, GAP = 4;
  // Each row's top: rows stack their lanes (a GPU stream has one; a CPU thread one per nesting depth).
  const lanes = T.lanes || T.rows.map(() => 1);
  const top = [];
  let h = AXIS;
  lanes.forEach((n, r) => { top.push(h); h += n * LANE + GAP; });
  const height = h + 2;
  let v0 = 0, v1 = end || 1, width = 0, label = 190;

  const bar = u.el("div", {class: "tl-bar"});
  const zin = u.el("button", {type: "button", id: "tl-zoom-in", title: "zoom in"}, "+");
  const zout = u.el("button", {type: "button", id: "tl-zoom-out", title: "zoom out"}, "\u2212");
  const reset = u.el("button", {type: "button", id: "tl-reset"}, "Reset zoom");
  const dl = u.el("button", {type: "button", id: "trace-download"}, "Download these events as Perfetto JSON");
  const where = u.el("span", {class: "hint", id: "tl-window"});
  bar.append(zin, zout, reset, dl, u.el("span", {class: "hint"}, "wheel or +/\u2212: zoom \u00b7 drag: pan \u00b7 hover: details"), where);
  const plot = u.svg("svg", {id: "timeline", height: height});
  const tip = u.el("div", {id: "tip"});
  box.append(bar, plot);
  document.body.appendChild(tip);

  function color(i) {  // one colour per name, stable across redraws
    let hsh = 0; const s = T.names[i];
    for (let k = 0; k < s.length; k++) hsh = (hsh * 31 + s.charCodeAt(k)) | 0;
    return u.COLORS[Math.abs(hsh) % u.COLORS.length];
  }
  function niceStep(span) {
    const raw = span / 8, p = Math.pow(10, Math.floor(Math.log10(raw)));
    return [1, 2, 5, 10].map(m => m * p).find(s => s >= raw);
  }
  function draw() {
    width = Math.max(box.clientWidth - 2, 320);
    label = Math.min(190, Math.round(width * 0.2));
    plot.setAttribute("width", width);
    const sx = (width - label) / (v1 - v0);
    const parts = [];
    T.rows.forEach((name, r) => {
      parts.push(u.svg("rect", {x: 0, y: top[r], width: width, height: lanes[r] * LANE, fill: r % 2 ? "#fafbfc" : "#fff"}));
    });
    const step = niceStep(v1 - v0);
    for (let t = Math.ceil(v0 / step) * step; t <= v1; t += step) {
      const x = label + (t - v0) * sx;
      parts.push(u.svg("line", {x1: x, x2: x, y1: AXIS - 4, y2: height, stroke: "#e3e6ec"}));
      parts.push(u.svg("text", {x: x + 2, y: 12}, u.fmt(+(t / 1000).toFixed(6)) + " ms"));
    }
    const g = u.svg("g", {"clip-path": "url(#tl-clip)"});
    let drawn = 0;
    for (let k = 0; k < N; k++) {
      const o = S * k, ts = T.ev[o + 1], dur = T.ev[o + 2];
      if (ts + dur < v0 || ts > v1) continue;
      // Cut to the plot: a long slice (a step's range) would otherwise reach far past the window, and so would
      // whatever is placed by its box (the pointer's tip).
      const x = Math.max(label + (ts - v0) * sx, label - 1);
      const w = Math.max(Math.min(label + (ts + dur - v0) * sx, width + 1) - x, 0.6);
      const y = top[T.ev[o]] + T.ev[o + 5] * LANE + 1;
      g.appendChild(u.svg("rect", {x: x.toFixed(2), y: y, width: w.toFixed(2), height: LANE - 2,
                                   fill: color(T.ev[o + 3]), "data-i": k}));
      // A name where the slice has room for it: ranges (steps, layers, ops) read at a glance.
      if (w > 40) {
        const n = T.names[T.ev[o + 3]], room = Math.floor((w - 4) / 6);
        const tx = u.svg("text", {x: (Math.max(x, label) + 2).toFixed(2), y: y + LANE - 5, class: "slice", "data-i": k},
                         n.length > room ? n.slice(0, Math.max(room - 1, 1)) + "\u2026" : n);
        g.appendChild(tx);
      }
      drawn++;
    }
    const defs = u.svg("defs"), clip = u.svg("clipPath", {id: "tl-clip"});
    clip.appendChild(u.svg("rect", {x: label, y: 0, width: width - label, height: height}));
    defs.appendChild(clip);
    parts.push(defs, g);
    T.rows.forEach((name, r) => {
      parts.push(u.svg("rect", {x: 0, y: top[r], width: label - 4, height: lanes[r] * LANE, fill: "#f0f2f6"}));
      const chars = Math.floor((label - 10) / 6.2);
      const t = u.svg("text", {x: 6, y: top[r] + 12}, name.length > chars ? name.slice(0, chars - 1) + "\u2026" : name);
      t.appendChild(u.svg("title", {}, name));
      parts.push(t);
    });
    plot.replaceChildren(...parts);
    where.textContent = "showing " + u.fmt(+(v0 / 1000).toFixed(3)) + "\u2013" + u.fmt(+(v1 / 1000).toFixed(3)) +
      " ms, " + drawn.toLocaleString("en-US") + " events";
  }
  let pending = false;
  function redraw() { if (!pending) { pending = true; requestAnimationFrame(() => { pending = false; draw(); }); } }
  function zoom(at, f) {
    v0 = Math.max(0, at - (at - v0) * f); v1 = Math.min(end || 1, at + (v1 - at) * f);
    if (v1 - v0 < 0.01) v1 = v0 + 0.01;
    redraw();
  }

  plot.addEventListener("wheel", e => {
    e.preventDefault();
    const rect = plot.getBoundingClientRect();
    const at = v0 + (Math.max(e.clientX - rect.left - label, 0)) / (width - label) * (v1 - v0);
    zoom(at, e.deltaY > 0 ? 1.25 : 0.8);
  }, {passive: false});
  zin.addEventListener("click", () => zoom((v0 + v1) / 2, 0.5));
  zout.addEventListener("click", () => zoom((v0 + v1) / 2, 2));
  let drag = null;
  plot.addEventListener("mousedown", e => { drag = {x: e.clientX, v0: v0, v1: v1}; e.preventDefault(); });
  window.addEventListener("mouseup", () => { drag = null; });
  window.addEventListener("mousemove", e => {
    if (drag) {
      const d = (e.clientX - drag.x) / (width - label) * (drag.v1 - drag.v0);
      const span = drag.v1 - drag.v0;
      v0 = Math.min(Math.max(0, drag.v0 - d), Math.max(0, end - span)); v1 = v0 + span;
      tip.style.display = "none";
      redraw();
      return;
    }
    const i = e.target && e.target.getAttribute && e.target.getAttribute("data-i");
    if (i === null || i === undefined || e.target.ownerSVGElement !== plot) { tip.style.display = "none"; return; }
    const o = S * i;
    tip.textContent = T.names[T.ev[o + 3]] + "\n" + u.fmt(T.ev[o + 2]) + " \u00b5s at " + u.fmt(T.ev[o + 1] / 1000) + " ms" +
      (T.tips[T.ev[o + 4]] ? "\n" + T.tips[T.ev[o + 4]] : "");
    tip.style.display = "block";
    // Kept on screen: left of the pointer near the right edge, above it near the bottom.
    const tw = tip.offsetWidth, th = tip.offsetHeight;
    let x = e.clientX + 12, y = e.clientY + 14;
    if (x + tw > window.innerWidth - 4) x = Math.max(4, Math.min(e.clientX, window.innerWidth) - tw - 12);
    if (y + th > window.innerHeight - 4) y = Math.max(4, e.clientY - th - 10);
    tip.style.left = x + "px";
    tip.style.top = y + "px";
  });
  reset.addEventListener("click", () => { v0 = 0; v1 = end || 1; redraw(); });
  window.addEventListener("resize", redraw);

  dl.addEventListener("click", () => {
    // Built here from the embedded events, so the page carries no second copy of them.
    const ev = [];
    T.rows.forEach((name, r) => {
      ev.push({ph: "M", name: "thread_name", pid: T.row_pid[r], tid: T.row_tid[r], args: {name: name}});
    });
    for (let k = 0; k < N; k++) {
      const o = S * k, r = T.ev[o];
      ev.push({ph: "X", name: T.names[T.ev[o + 3]], pid: T.row_pid[r], tid: T.row_tid[r], ts: T.t0_us + T.ev[o + 1],
               dur: T.ev[o + 2], args: {details: T.tips[T.ev[o + 4]]}});
    }
    const blob = new Blob([JSON.stringify({traceEvents: ev})], {type: "application/json"});
    const a = u.el("a", {href: URL.createObjectURL(blob), download: "pyprof-trace-excerpt.json"});
    document.body.appendChild(a); a.click(); a.remove();
  });
  draw();
};
