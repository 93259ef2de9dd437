// report.html's runs table (sort, filter, pages) and learning-curve chart. The data sit in the page
// as JSON (analysis/html.py): runs as columns, each run's curve as [steps, val loss, train loss].
(function () {
  "use strict";
  // -- figures at full size -----------------------------------------------------------------------
  // A browser will not open a data: URI as a page, so a figure opens in the page's own viewer,
  // at its natural size (scroll to see it all) or fitted to the window.
  var viewer = document.getElementById("viewer");
  var viewerImg = document.getElementById("viewer-img");
  function showFigure(link) {
    var img = link.querySelector("img");
    viewerImg.src = img.src;
    viewerImg.alt = img.alt;
    document.getElementById("viewer-name").textContent = img.alt.replace(/_/g, " ");
    document.getElementById("viewer-file").href = link.getAttribute("href");
    viewer.classList.remove("fit");
    viewer.hidden = false;
    document.getElementById("viewer-close").focus();
  }
  function closeFigure() { viewer.hidden = true; }
  document.querySelectorAll("#figures a.full").forEach(function (link) {
    link.addEventListener("click", function (e) {
      if (e.ctrlKey || e.metaKey || e.shiftKey || e.button !== 0) return;  // a new tab: the file
      e.preventDefault();
      showFigure(link);
    });
  });
  document.getElementById("viewer-close").addEventListener("click", closeFigure);
  document.getElementById("viewer-fit").addEventListener("click", function () { viewer.classList.toggle("fit"); });
  viewerImg.addEventListener("click", function () { viewer.classList.toggle("fit"); });
  document.addEventListener("keydown", function (e) { if (e.key === "Escape" && !viewer.hidden) closeFigure(); });

  var data = JSON.parse(document.getElementById("data").textContent);
  var cols = data.columns, runs = data.runs, n = data.n_runs, key = data.key;
  var PAGE = 100, SVG = "http://www.w3.org/2000/svg";
  var order = [], view = [], sortCol = null, sortDir = 1, page = 0, picked = null;
  for (var i = 0; i < n; i++) order.push(i);
  var numeric = {};
  cols.forEach(function (c) {
    numeric[c] = runs[c].every(function (v) { return v === null || typeof v === "number"; });
  });

  function fmt(v) {
    if (v === null || v === undefined) return "\u2013";
    if (typeof v !== "number") return String(v);
    if (Number.isInteger(v) && Math.abs(v) < 1e7) return String(v);
    var a = Math.abs(v);
    return (a >= 1e5 || (a < 1e-3 && a > 0)) ? v.toExponential(3) : String(Number(v.toPrecision(5)));
  }

  // -- the table --------------------------------------------------------------------------------
  var table = document.getElementById("runs-table");
  var thead = table.querySelector("thead"), tbody = table.querySelector("tbody");
  var head = document.createElement("tr");
  cols.forEach(function (c) {
    var th = document.createElement("th");
    th.textContent = c;
    th.dataset.col = c;
    th.tabIndex = 0;
    th.addEventListener("click", function () { sortBy(c); });
    th.addEventListener("keydown", function (e) { if (e.key === "Enter") sortBy(c); });
    head.appendChild(th);
  });
  thead.appendChild(head);

  function compare(col, dir) {
    var v = runs[col], num = numeric[col];
    return function (a, b) {
      var x = v[a], y = v[b];
      if (x === null || y === null) return (x === null) - (y === null) || a - b;  // missing last
      var d = num ? x - y : String(x).localeCompare(String(y), undefined, {numeric: true});
      return d * dir || a - b;
    };
  }

  function sortBy(c) {
    sortDir = sortCol === c ? -sortDir : 1;
    sortCol = c;
    order.sort(compare(c, sortDir));
    head.querySelectorAll("th").forEach(function (th) {
      th.className = th.dataset.col === c ? (sortDir > 0 ? "asc" : "desc") : "";
    });
    applyFilter(false);
  }

  function parseFilter(text) {
    var tests = [];
    text.trim().split(/\s+/).filter(Boolean).forEach(function (tok) {
      var m = /^([A-Za-z_][\w.]*)(:|>=|<=|>|<|=)(.+)$/.exec(tok);
      if (m && cols.indexOf(m[1]) >= 0) {
        var c = m[1], op = m[2], want = m[3], v = runs[c];
        var num = parseFloat(want);
        if (op === ":" || op === "=") {
          tests.push(numeric[c] && !isNaN(num)
            ? function (i) { return v[i] === num; }
            : function (i) { return v[i] !== null && String(v[i]).toLowerCase() === want.toLowerCase(); });
        } else {
          tests.push(function (i) {
            var x = v[i];
            if (x === null || isNaN(num)) return false;
            return op === ">" ? x > num : op === "<" ? x < num : op === ">=" ? x >= num : x <= num;
          });
        }
      } else {
        var low = tok.toLowerCase();
        tests.push(function (i) {
          return cols.some(function (c) {
            var x = runs[c][i];
            return x !== null && String(x).toLowerCase().indexOf(low) >= 0;
          });
        });
      }
    });
    return function (i) { return tests.every(function (t) { return t(i); }); };
  }

  var filterBox = document.getElementById("filter");
  function applyFilter(resetPage) {
    var ok = parseFilter(filterBox.value);
    view = order.filter(ok);
    if (resetPage !== false) page = 0;
    page = Math.min(page, Math.max(0, Math.ceil(view.length / PAGE) - 1));
    renderRows();
  }

  function renderRows() {
    var frag = document.createDocumentFragment();
    view.slice(page * PAGE, (page + 1) * PAGE).forEach(function (i) {
      var tr = document.createElement("tr");
      tr.dataset.i = i;
      if (shapeOf(i) === picked) tr.className = "picked";
      cols.forEach(function (c) {
        var td = document.createElement("td");
        td.textContent = fmt(runs[c][i]);
        if (c === "status" && runs[c][i]) td.className = "status-" + runs[c][i];
        tr.appendChild(td);
      });
      frag.appendChild(tr);
    });
    tbody.replaceChildren(frag);
    document.getElementById("count").textContent = view.length + " of " + n + " runs";
    var pages = Math.max(1, Math.ceil(view.length / PAGE));
    document.getElementById("page").textContent = " page " + (page + 1) + " / " + pages + " ";
  }

  filterBox.addEventListener("input", function () { applyFilter(true); });
  document.getElementById("prev").addEventListener("click", function () {
    if (page > 0) { page--; renderRows(); }
  });
  document.getElementById("next").addEventListener("click", function () {
    if ((page + 1) * PAGE < view.length) { page++; renderRows(); }
  });
  tbody.addEventListener("click", function (e) {
    var tr = e.target.closest("tr");
    if (!tr) return;
    showShape(shapeOf(+tr.dataset.i));
    document.getElementById("curves").scrollIntoView();
  });

  // -- shapes and their curves ----------------------------------------------------------------
  function shapeOf(i) {
    var fam = runs.family ? runs.family[i] + " " : "";
    return fam + "depth " + fmt(runs.depth[i]) + " \u00d7 width " + fmt(runs.width[i]);
  }
  var shapes = {}, shapeList = [];
  for (var j = 0; j < n; j++) {
    var s = shapeOf(j);
    if (!shapes[s]) { shapes[s] = []; shapeList.push(s); }
    shapes[s].push(j);
  }
  var byShape = function (a, b) {
    var i = shapes[a][0], k = shapes[b][0];
    var fa = runs.family ? String(runs.family[i]) : "", fb = runs.family ? String(runs.family[k]) : "";
    return fa.localeCompare(fb) || runs.depth[i] - runs.depth[k] || runs.width[i] - runs.width[k];
  };
  shapeList.sort(byShape);
  var select = document.getElementById("shape");
  shapeList.forEach(function (s) {
    var withCurves = shapes[s].filter(function (i) { return key && data.curves[runs[key][i]]; }).length;
    var o = document.createElement("option");
    o.value = s;
    o.textContent = s + " (" + shapes[s].length + " run" + (shapes[s].length > 1 ? "s" : "") +
      (withCurves < shapes[s].length ? ", " + withCurves + " with curves" : "") + ")";
    select.appendChild(o);
  });
  select.addEventListener("change", function () { showShape(select.value); });

  function el(name, attrs, parent) {
    var e = document.createElementNS(SVG, name);
    for (var a in attrs) e.setAttribute(a, attrs[a]);
    if (parent) parent.appendChild(e);
    return e;
  }

  function ticks(lo, hi, count) {
    var step = Math.pow(10, Math.floor(Math.log10((hi - lo) / count || 1)));
    [1, 2, 5, 10].some(function (m) { if ((hi - lo) / (step * m) <= count) { step *= m; return true; } return false; });
    var out = [];
    for (var t = Math.ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) out.push(+t.toPrecision(6));
    return out;
  }

  var PALETTE = ["#3b5bdb", "#e8590c", "#2b8a3e", "#c2255c", "#5f3dc4", "#0b7285", "#a61e4d", "#5c940d"];
  function showShape(s) {
    picked = s;
    select.value = s;
    var chart = document.getElementById("chart");
    var lines = (shapes[s] || []).map(function (i) { return [i, key ? data.curves[runs[key][i]] : null]; })
      .filter(function (p) { return p[1] && p[1][0].length; });
    renderRows();
    if (!lines.length) { chart.textContent = "No learning curves are stored for " + s + "."; return; }
    var W = 760, H = 380, L = 64, R = 170, T = 16, B = 44;
    var xs = [], ys = [];
    lines.forEach(function (p) {
      p[1][0].forEach(function (x) { if (x > 0) xs.push(Math.log10(x)); });
      [p[1][1], p[1][2]].forEach(function (arr) { arr.forEach(function (y) { if (y !== null) ys.push(y); }); });
    });
    var x0 = Math.min.apply(null, xs), x1 = Math.max.apply(null, xs);
    var y0 = Math.min.apply(null, ys), y1 = Math.max.apply(null, ys);
    if (x1 - x0 < 1e-9) { x0 -= 0.5; x1 += 0.5; }
    if (y1 - y0 < 1e-9) { y0 -= 0.5; y1 += 0.5; }
    var pad = (y1 - y0) * 0.05; y0 -= pad; y1 += pad;
    var X = function (v) { return L + (Math.log10(v) - x0) / (x1 - x0) * (W - L - R); };
    var Y = function (v) { return T + (y1 - v) / (y1 - y0) * (H - T - B); };
    var svg = el("svg", {viewBox: "0 0 " + W + " " + H, role: "img",
                         "aria-label": "learning curves of " + s});
    ticks(y0, y1, 6).forEach(function (t) {
      el("line", {x1: L, x2: W - R, y1: Y(t), y2: Y(t), "class": "grid"}, svg);
      el("text", {x: L - 6, y: Y(t) + 4, "text-anchor": "end"}, svg).textContent = fmt(t);
    });
    for (var e = Math.ceil(x0); e <= Math.floor(x1); e++) {
      var xv = Math.pow(10, e);
      el("line", {x1: X(xv), x2: X(xv), y1: T, y2: H - B, "class": "grid"}, svg);
      el("text", {x: X(xv), y: H - B + 16, "text-anchor": "middle"}, svg).textContent = fmt(xv);
    }
    el("line", {x1: L, x2: W - R, y1: H - B, y2: H - B, "class": "axis"}, svg);
    el("line", {x1: L, x2: L, y1: T, y2: H - B, "class": "axis"}, svg);
    el("text", {x: (L + W - R) / 2, y: H - 8, "text-anchor": "middle"}, svg).textContent = "step (log scale)";
    el("text", {x: 14, y: (T + H - B) / 2, transform: "rotate(-90 14 " + (T + H - B) / 2 + ")",
                "text-anchor": "middle"}, svg).textContent = "loss";
    lines.forEach(function (p, k) {
      var i = p[0], c = p[1], color = PALETTE[k % PALETTE.length];
      [[c[1], null], [c[2], "4 3"]].forEach(function (spec) {
        var pts = [];
        c[0].forEach(function (x, m) {
          if (x > 0 && spec[0][m] !== null && spec[0][m] !== undefined) pts.push(X(x).toFixed(1) + "," + Y(spec[0][m]).toFixed(1));
        });
        if (!pts.length) return;
        var a = {points: pts.join(" "), fill: "none", stroke: color, "stroke-width": spec[1] ? 1 : 1.8,
                 "class": spec[1] ? "train" : "val"};
        if (spec[1]) a["stroke-dasharray"] = spec[1];
        el("polyline", a, svg);
      });
      if (k < 14) {
        var ly = T + 14 + 16 * k;
        el("line", {x1: W - R + 10, x2: W - R + 28, y1: ly - 4, y2: ly - 4, stroke: color, "stroke-width": 2}, svg);
        var label = (runs.seed ? "seed " + fmt(runs.seed[i]) : "") + (runs.lr ? " lr " + fmt(runs.lr[i]) : "");
        el("text", {x: W - R + 32, y: ly}, svg).textContent = (label.trim() || runs[key][i]) +
          (runs.status && runs.status[i] !== "ok" ? " (" + runs.status[i] + ")" : "");
      } else if (k === 14) {
        el("text", {x: W - R + 10, y: T + 14 + 16 * k}, svg).textContent = "+" + (lines.length - 14) + " more";
      }
    });
    el("text", {x: W - R + 10, y: H - B}, svg).textContent = "solid: val, dashed: train";
    chart.replaceChildren(svg);
  }

  applyFilter(true);
  if (shapeList.length) showShape(shapeList[0]);
  window.reportReadyAt = performance.now();
  window.reportReady = true;
})();
