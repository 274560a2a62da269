// pyprof report: the timeline of the first activities (GPU streams, CPU launch threads) as one SVG, redrawn
// for the visible window only, so zooming stays fast with the capped tens of thousands of events.
"use strict";
window.pyprofTimeline = function (DATA, u) {
  const T = DATA.timeline;
  if (!T) return;
  const box = document.getElementById("trace-body");
  const N = T.ev.length / 5;  // flat [row, ts_us, dur_us, name, tip] per event
  let end = 0;
  for (let k = 0; k < N; k++) end = Math.max(end, T.ev[5 * k + 1] + T.ev[5 * k + 2]);
  const LABEL = 190, ROW = 18, AXIS = 22;
  let v0 = 0, v1 = end || 1, width = 0;

  const bar = u.el("div", {class: "tl-bar"});
  const reset = u.el("button", {}, "Reset zoom");
  const dl = u.el("button", {id: "trace-download"}, "Download these events as Perfetto JSON");
  bar.append(reset, dl, u.el("span", {class: "hint"}, "wheel: zoom \u00b7 drag: pan \u00b7 hover: details"));
  const plot = u.svg("svg", {id: "timeline", height: AXIS + T.rows.length * ROW + 4});
  const tip = u.el("div", {id: "tip"});
  box.append(bar, plot);
  document.body.appendChild(tip);

  function color(i) {  // one colour per kernel name, stable across redraws
    let h = 0; const s = T.names[i];
    for (let k = 0; k < s.length; k++) h = (h * 31 + s.charCodeAt(k)) | 0;
    return u.COLORS[Math.abs(h) % u.COLORS.length];
  }
  function niceStep(span) {
    const raw = span / 8, p = Math.pow(10, Math.floor(Math.log10(raw)));
    return [1, 2, 5, 10].map(m => m * p).find(s => s >= raw);
  }
  function draw() {
    width = Math.max(box.clientWidth - 2, 600);
    plot.setAttribute("width", width);
    const sx = (width - LABEL) / (v1 - v0);
    const parts = [];
    T.rows.forEach((name, r) => {
      parts.push(u.svg("rect", {x: 0, y: AXIS + r * ROW, width: width, height: ROW, fill: r % 2 ? "#fafbfc" : "#fff"}));
    });
    const step = niceStep(v1 - v0);
    for (let t = Math.ceil(v0 / step) * step; t <= v1; t += step) {
      const x = LABEL + (t - v0) * sx;
      parts.push(u.svg("line", {x1: x, x2: x, y1: AXIS - 4, y2: AXIS + T.rows.length * ROW, stroke: "#e3e6ec"}));
      parts.push(u.svg("text", {x: x + 2, y: 12}, u.fmt(+(t / 1000).toFixed(6)) + " ms"));
    }
    const g = u.svg("g", {"clip-path": "url(#tl-clip)"});
    for (let k = 0; k < N; k++) {
      const o = 5 * k, ts = T.ev[o + 1], dur = T.ev[o + 2];
      if (ts + dur < v0 || ts > v1) continue;
      const x = LABEL + (ts - v0) * sx;
      g.appendChild(u.svg("rect", {x: x.toFixed(2), y: AXIS + T.ev[o] * ROW + 2, width: Math.max(dur * sx, 0.6).toFixed(2),
                                   height: ROW - 4, fill: color(T.ev[o + 3]), "data-i": k}));
    }
    const defs = u.svg("defs"), clip = u.svg("clipPath", {id: "tl-clip"});
    clip.appendChild(u.svg("rect", {x: LABEL, y: 0, width: width - LABEL, height: AXIS + T.rows.length * ROW}));
    defs.appendChild(clip);
    parts.push(defs, g);
    T.rows.forEach((name, r) => {
      parts.push(u.svg("rect", {x: 0, y: AXIS + r * ROW, width: LABEL - 4, height: ROW, fill: "#f0f2f6"}));
      parts.push(u.svg("text", {x: 6, y: AXIS + r * ROW + 13}, name.length > 30 ? name.slice(0, 29) + "\u2026" : name));
    });
    plot.replaceChildren(...parts);
  }
  let pending = false;
  function redraw() { if (!pending) { pending = true; requestAnimationFrame(() => { pending = false; draw(); }); } }

  plot.addEventListener("wheel", e => {
    e.preventDefault();
    const rect = plot.getBoundingClientRect();
    const at = v0 + (Math.max(e.clientX - rect.left - LABEL, 0)) / (width - LABEL) * (v1 - v0);
    const f = e.deltaY > 0 ? 1.25 : 0.8;
    v0 = Math.max(0, at - (at - v0) * f); v1 = Math.min(end || 1, at + (v1 - at) * f);
    if (v1 - v0 < 0.01) v1 = v0 + 0.01;
    redraw();
  }, {passive: false});
  let drag = null;
  plot.addEventListener("mousedown", e => { drag = {x: e.clientX, v0: v0, v1: v1}; });
  window.addEventListener("mouseup", () => { drag = null; });
  window.addEventListener("mousemove", e => {
    if (drag) {
      const d = (e.clientX - drag.x) / (width - LABEL) * (drag.v1 - drag.v0);
      const span = drag.v1 - drag.v0;
      v0 = Math.min(Math.max(0, drag.v0 - d), Math.max(0, end - span)); v1 = v0 + span;
      redraw();
      return;
    }
    const i = e.target && e.target.getAttribute && e.target.getAttribute("data-i");
    if (i === null || i === undefined || e.target.ownerSVGElement !== plot) { tip.style.display = "none"; return; }
    const o = 5 * i;
    tip.textContent = T.names[T.ev[o + 3]] + "\n" + u.fmt(T.ev[o + 2]) + " \u00b5s at " + u.fmt(T.ev[o + 1] / 1000) + " ms" +
      (T.tips[T.ev[o + 4]] ? "\n" + T.tips[T.ev[o + 4]] : "");
    tip.style.display = "block";
    tip.style.left = Math.min(e.clientX + 12, window.innerWidth - 580) + "px";
    tip.style.top = (e.clientY + 14) + "px";
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
      const o = 5 * k, r = T.ev[o];
      ev.push({ph: "X", name: T.names[T.ev[o + 3]], pid: T.row_pid[r], tid: T.row_tid[r], ts: T.t0_us + T.ev[o + 1],
               dur: T.ev[o + 2], args: {details: T.tips[T.ev[o + 4]]}});
    }
    const blob = new Blob([JSON.stringify({traceEvents: ev})], {type: "application/json"});
    const a = u.el("a", {href: URL.createObjectURL(blob), download: "pyprof-trace-excerpt.json"});
    document.body.appendChild(a); a.click(); a.remove();
  });
  draw();
};
