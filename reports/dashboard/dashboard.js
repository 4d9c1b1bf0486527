// dlbench history dashboard renderer: reads the JSON that harness/dashboard.cpp embeds (#data) and
// draws the regressions table, the filters and one SVG trend per case (a line per machine, the flagged
// step as a dashed marker, every point a link to its run's report). Text from the data only ever goes
// through textContent / setAttribute, never innerHTML.
(function () {
  "use strict";
  const D = JSON.parse(document.getElementById("data").textContent);
  const SVGNS = "http://www.w3.org/2000/svg";
  const COLORS = ["#2f6db5", "#e67e22", "#16a085", "#8e44ad", "#c0392b", "#7f8c8d", "#d4ac0d", "#1abc9c"];
  const W = 440, H = 170, L = 54, R = 10, T = 10, B = 26;  // chart size and margins (px)

  function el(tag, attrs, text) {
    const e = document.createElement(tag);
    for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function sv(tag, attrs) {
    const e = document.createElementNS(SVGNS, tag);
    for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
    return e;
  }
  function color(m) { return COLORS[m % COLORS.length]; }
  function fmtTime(us) {
    if (us >= 1e6) return (us / 1e6).toPrecision(3) + " s";
    if (us >= 1e3) return (us / 1e3).toPrecision(3) + " ms";
    return us.toPrecision(3) + " us";
  }
  function fmtChange(r) { const p = (r - 1) * 100; return (p >= 0 ? "+" : "") + p.toFixed(1) + "%"; }
  function day(t) { return new Date(t * 1000).toISOString().slice(0, 10); }
  function href(path) { return path.split("/").map(encodeURIComponent).join("/"); }

  // Header: what the page holds and the machines' colours.
  const nm = D.machines.length;
  document.getElementById("meta").textContent =
    D.runs + " runs of " + nm + " machine" + (nm === 1 ? "" : "s") + ", " + D.cases.length + " cases; " + D.time +
    " median per run; a step: a sustained shift of more than " + (D.threshold * 100).toFixed(1) +
    "% over segments of at least " + D.min_segment + " runs, beyond 3 standard errors. Generated " + D.generated + ".";
  const legend = document.getElementById("legend");
  D.machines.forEach(function (m, i) {
    const s = el("span");
    const sw = el("i");
    sw.style.background = color(i);
    s.appendChild(sw);
    s.appendChild(document.createTextNode(m.key + " (" + m.runs.length + " runs)"));
    legend.appendChild(s);
  });

  // The trend of one case: x = run date, y = median time; a polyline and linked points per machine.
  function chart(c) {
    const pts = [];
    c.lines.forEach(function (ln) {
      const runs = D.machines[ln.m].runs;
      ln.runs.forEach(function (ri, k) { pts.push([runs[ri].t, ln.us[k]]); });
    });
    const svg = sv("svg", { viewBox: "0 0 " + W + " " + H, role: "img" });
    if (!pts.length) return svg;
    let x0 = Math.min.apply(null, pts.map(function (p) { return p[0]; }));
    let x1 = Math.max.apply(null, pts.map(function (p) { return p[0]; }));
    let y0 = Math.min.apply(null, pts.map(function (p) { return p[1]; }));
    let y1 = Math.max.apply(null, pts.map(function (p) { return p[1]; }));
    if (x1 === x0) { x0 -= 43200; x1 += 43200; }
    const pad = (y1 - y0) * 0.08 || y1 * 0.05 || 1;
    y0 = Math.max(0, y0 - pad); y1 += pad;
    const X = function (t) { return L + (t - x0) / (x1 - x0) * (W - L - R); };
    const Y = function (v) { return H - B - (v - y0) / (y1 - y0) * (H - T - B); };
    svg.appendChild(sv("rect", { x: L, y: T, width: W - L - R, height: H - T - B, fill: "#fafbfd", stroke: "#ccd" }));
    for (let k = 0; k <= 3; ++k) {  // y ticks
      const v = y0 + (y1 - y0) * k / 3, y = Y(v);
      svg.appendChild(sv("line", { x1: L, x2: W - R, y1: y, y2: y, stroke: "#e3e6ee" }));
      const t = sv("text", { x: L - 4, y: y + 3, "text-anchor": "end" });
      t.textContent = fmtTime(v);
      svg.appendChild(t);
    }
    for (let k = 0; k <= 2; ++k) {  // x ticks: dates
      const tx = sv("text", { x: X(x0 + (x1 - x0) * k / 2), y: H - 8, "text-anchor": ["start", "middle", "end"][k] });
      tx.textContent = day(x0 + (x1 - x0) * k / 2);
      svg.appendChild(tx);
    }
    c.lines.forEach(function (ln) {
      const runs = D.machines[ln.m].runs, col = color(ln.m);
      if (ln.step) {  // the flagged step: between the last run before it and the first after
        const a = runs[ln.runs[ln.step.i - 1]].t, b = runs[ln.runs[ln.step.i]].t, x = X((a + b) / 2);
        const cls = ln.step.ratio > 1 ? "#c0392b" : "#1e8449";
        svg.appendChild(sv("line", { x1: x, x2: x, y1: T, y2: H - B, stroke: cls, "stroke-dasharray": "4 3", "stroke-width": 1.5,
                                     "class": "step" }));
        const lab = sv("text", { x: x + 3, y: T + 11 });
        lab.setAttribute("style", "fill:" + cls + ";font-weight:600");
        lab.textContent = fmtChange(ln.step.ratio) + " step";
        svg.appendChild(lab);
      }
      const xy = ln.runs.map(function (ri, k) { return X(runs[ri].t).toFixed(1) + "," + Y(ln.us[k]).toFixed(1); });
      svg.appendChild(sv("polyline", { points: xy.join(" "), fill: "none", stroke: col, "stroke-width": 1.5 }));
      ln.runs.forEach(function (ri, k) {
        const r = runs[ri];
        const a = sv("a", { href: href(r.href), "class": "point" });
        const dot = sv("circle", { cx: X(r.t).toFixed(1), cy: Y(ln.us[k]).toFixed(1), r: 2.6, fill: col });
        const tip = sv("title");
        tip.textContent = r.date + (r.git ? "  git " + r.git : "") + "\n" + fmtTime(ln.us[k]) + "\n" + D.machines[ln.m].key;
        dot.appendChild(tip);
        a.appendChild(dot);
        svg.appendChild(a);
      });
    });
    return svg;
  }

  // Cases: current regressions first (the order of D.regressions), then by name.
  const rank = {};
  D.regressions.forEach(function (r, i) { if (!(r["case"] in rank)) rank[r["case"]] = i; });
  const order = D.cases.map(function (c, i) { return i; }).sort(function (a, b) {
    const ra = a in rank ? rank[a] : 1e9, rb = b in rank ? rank[b] : 1e9;
    return ra !== rb ? ra - rb : (D.cases[a].name < D.cases[b].name ? -1 : 1);
  });
  const grid = document.getElementById("cases");
  const cards = [];
  order.forEach(function (i) {
    const c = D.cases[i];
    const card = el("section", { "class": "case" + (i in rank ? " regression" : ""), id: "case-" + i });
    card.appendChild(el("h3", {}, c.name));
    [c.suite, c.device, c.dtype].forEach(function (t) { if (t) card.appendChild(el("span", { "class": "chip" }, t)); });
    card.appendChild(chart(c));
    grid.appendChild(card);
    cards.push({ card: card, c: c, regression: i in rank });
  });

  // The regressions table.
  const box = document.getElementById("regressions");
  if (!D.regressions.length) {
    box.appendChild(el("p", {}, "None: no case's latest runs sit on a flagged step to slower, and none failed in its latest run."));
  } else {
    const tab = el("table", { id: "regression-table" });
    const head = el("tr");
    ["case", "machine", "change", "since", "state"].forEach(function (h) { head.appendChild(el("th", {}, h)); });
    tab.appendChild(head);
    D.regressions.forEach(function (r) {
      const c = D.cases[r["case"]], ln = c.lines[r.line], m = D.machines[ln.m];
      const tr = el("tr");
      const td = el("td");
      td.appendChild(el("a", { href: "#case-" + r["case"] }, c.name));
      tr.appendChild(td);
      tr.appendChild(el("td", {}, m.key));
      tr.appendChild(el("td", { "class": "slower" }, r.ratio ? fmtChange(r.ratio) : "-"));
      const since = r.run !== undefined ? m.runs[r.run] : null;
      tr.appendChild(el("td", {}, since ? since.date + (since.git ? "  git " + since.git : "") : "-"));
      tr.appendChild(el("td", {}, r.failed ? "FAILED in the latest run" : "SLOWER"));
      tab.appendChild(tr);
    });
    box.appendChild(tab);
  }

  // Filters.
  function options(id, values) {
    const s = document.getElementById(id);
    s.appendChild(el("option", { value: "" }, "all"));
    values.forEach(function (v) { s.appendChild(el("option", { value: v }, v)); });
    return s;
  }
  function uniq(key) {
    const seen = {};
    D.cases.forEach(function (c) { seen[c[key]] = 1; });
    return Object.keys(seen).sort();
  }
  const fs = options("f-suite", uniq("suite")), fd = options("f-device", uniq("device"));
  const fn = document.getElementById("f-name"), fr = document.getElementById("f-regressions");
  function apply() {
    let shown = 0;
    cards.forEach(function (k) {
      const ok = (!fs.value || k.c.suite === fs.value) && (!fd.value || k.c.device === fd.value) &&
                 (!fn.value || k.c.name.indexOf(fn.value) >= 0) && (!fr.checked || k.regression);
      k.card.style.display = ok ? "" : "none";
      shown += ok;
    });
    document.getElementById("f-count").textContent = shown + " of " + cards.length + " cases shown";
  }
  [fs, fd, fr].forEach(function (e) { e.addEventListener("change", apply); });
  fn.addEventListener("input", apply);
  apply();

  const warn = document.getElementById("warnings");
  (D.warnings || []).forEach(function (w) { warn.appendChild(el("p", {}, "note: " + w)); });
  document.body.setAttribute("data-rendered", "yes");
})();
