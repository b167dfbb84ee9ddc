/* spanfix compare: builds the comparison page from the JSON payload (spanfix/report/compare_page.py) and draws
 * its two charts itself, as SVG (the page carries no Plotly). Every run name and path is user data: it enters
 * the document through textContent only. */
(function () {
  "use strict";

  var page = window.spanfixPage, h = page.h, section = page.section;
  var data;

  function fmt(value, digits) { return value === null || value === undefined ? "-" : value.toFixed(digits); }

  function table(spec) {
    var head = h("tr");
    var t = h("table", {"class": "data" + (spec.fit ? " fit" : ""), id: spec.id, "data-table": spec.id});
    spec.columns.forEach(function (col) {
      head.appendChild(h("th", {text: col.label, "data-key": col.key, "class": col.numeric ? "num" : "txt"}));
    });
    var body = h("tbody");
    spec.rows.forEach(function (row, index) {
      var tr = h("tr");
      row.forEach(function (cell, index) {
        var col = spec.columns[index];
        var td = h("td", {text: cell.t, title: cell.title, "data-key": col.key,
                          "class": (col.numeric ? "num" : "txt") + (cell.tone ? " tone-" + cell.tone : "")});
        if (cell.v !== undefined) td.setAttribute("data-value", typeof cell.v === "string" ? cell.v : JSON.stringify(cell.v));
        tr.appendChild(td);
      });
      body.appendChild(tr);
      var why = spec.whys ? spec.whys[index] : null;
      if (why) {  // why the row has no speedup, under it, across the table
        var line = h("td", {"class": "why", colspan: spec.columns.length, text: "not compared: " + why});
        line.style.whiteSpace = "normal";
        line.style.color = "var(--muted)";
        body.appendChild(h("tr", {"class": "why", "data-why": "true"}, line));
      }
    });
    t.appendChild(h("thead", null, head));
    t.appendChild(body);
    var wrap = h("div", {"class": "table-wrap"}, t);
    if (spec.note) wrap.appendChild(h("p", {"class": "note", text: spec.note}));
    return wrap;
  }

  function list(items, cls) {
    var ul = h("ul", {"class": cls || null});
    items.forEach(function (item) { ul.appendChild(h("li", {text: item})); });
    return ul;
  }

  /* 1. Header ------------------------------------------------------------------------------------- */

  function header(root) {
    var top = h("header", {"class": "top"},
      h("h1", {text: data.title}),
      h("p", {"class": "sub"}, "Speculative-decoding runs side by side against the plain run ",
        h("code", {"class": "path", text: data.baseline}), ", as ", h("code", {text: "spanfix compare"}),
        " measures them: " + data.runs.length + " runs, batch sizes " + data.batch_sizes.join(", ") + "."));
    var nav = h("nav", {"class": "toc"});
    [["speedup", "Speedup"], ["table", "Table"], ["verdicts", "Verdicts"]].concat(data.sweep ? [["sweep", "SGLang's sweep"]] : [])
      .forEach(function (l) { nav.appendChild(h("a", {href: "#" + l[0], text: l[1]})); });
    top.appendChild(nav);
    root.appendChild(top);
    if (data.errors.length) root.appendChild(h("div", {"class": "callout"}, h("strong", {text: "Inputs not used: "}),
                                                 list(data.errors, "errors")));
  }

  /* 2. Charts --------------------------------------------------------------------------------------- */
  /* Drawn here as SVG, not with Plotly: two small charts need none of its 1.5 MB. Every name enters them
   * through textContent only. A point's tooltip is its <title>. */

  var SVG = "http://www.w3.org/2000/svg";
  var W = 620, H = 360, M = {l: 58, r: 14, t: 14, b: 46};
  var DODGE = 11;  // px between the points of two runs at one batch size: a marker is 9 px across

  function sv(tag, attrs, text) {
    var node = document.createElementNS(SVG, tag);
    for (var key in attrs || {}) {
      if (attrs[key] !== null && attrs[key] !== undefined) node.setAttribute(key, String(attrs[key]));
    }
    if (text !== undefined) node.textContent = String(text);
    return node;
  }

  function drawn(run, key) {
    return run.points.filter(function (p) { return p[key] !== null && p[key] !== undefined; });
  }

  function niceStep(span) {
    var raw = span / 5, power = Math.pow(10, Math.floor(Math.log(raw) / Math.LN10)), f = raw / power;
    return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * power;
  }

  /* One chart: series = [{name, color, dash, shape ("circle" or "diamond"), offset (px), points:
   * [{bs, y, low, high, hollow, star, tip}]}]; reference: a dashed grey line at that y, named. */
  function plot(parent, name, spec) {
    var sizes = data.batch_sizes, lo = Math.log(sizes[0]), hi = Math.log(sizes[sizes.length - 1]);
    var left = M.l + 36, right = W - M.r - 36, top = M.t, bottom = H - M.b;
    function x(bs) { return hi === lo ? (left + right) / 2 : left + (Math.log(bs) - lo) / (hi - lo) * (right - left); }
    var most = spec.reference === undefined ? 0 : spec.reference;
    spec.series.forEach(function (sr) {
      sr.points.forEach(function (p) { most = Math.max(most, p.y, p.high === null || p.high === undefined ? 0 : p.high); });
    });
    var step = niceStep(most > 0 ? most * 1.1 : 1), ymax = Math.ceil(most * 1.08 / step) * step || step;
    function y(value) { return bottom - value / ymax * (bottom - top); }
    var svg = sv("svg", {viewBox: "0 0 " + W + " " + H, "class": "chart-svg", role: "img", "aria-label": spec.title,
                         "data-chart": name});
    var grid = sv("g", {"class": "grid"});
    for (var v = 0; v <= ymax + step / 1e6; v += step) {
      grid.appendChild(sv("line", {x1: M.l, x2: W - M.r, y1: y(v), y2: y(v), stroke: "#ececec"}));
      grid.appendChild(sv("text", {x: M.l - 6, y: y(v) + 4, "text-anchor": "end", "class": "tick"},
                          +v.toFixed(6) + ""));
    }
    sizes.forEach(function (bs) {
      grid.appendChild(sv("line", {x1: x(bs), x2: x(bs), y1: top, y2: bottom, stroke: "#f3f3f3"}));
      grid.appendChild(sv("text", {x: x(bs), y: bottom + 16, "text-anchor": "middle", "class": "tick"}, bs));
    });
    grid.appendChild(sv("line", {x1: M.l, x2: W - M.r, y1: bottom, y2: bottom, stroke: "#999"}));
    grid.appendChild(sv("line", {x1: M.l, x2: M.l, y1: top, y2: bottom, stroke: "#999"}));
    grid.appendChild(sv("text", {x: (M.l + W - M.r) / 2, y: H - 8, "text-anchor": "middle", "class": "axis-title"},
                        "batch size (requests per decode iteration)"));
    grid.appendChild(sv("text", {x: 14, y: (top + bottom) / 2, "text-anchor": "middle", "class": "axis-title",
                                 transform: "rotate(-90 14 " + (top + bottom) / 2 + ")"}, spec.ylabel));
    svg.appendChild(grid);
    if (spec.reference !== undefined) {
      svg.appendChild(sv("line", {x1: M.l, x2: W - M.r, y1: y(spec.reference), y2: y(spec.reference), stroke: "#7f7f7f",
                                  "stroke-dasharray": "6 4", "stroke-width": 1.5, "class": "reference"}));
    }
    spec.series.forEach(function (sr) {
      var g = sv("g", {"class": "series", "data-name": sr.name});
      var pts = sr.points.slice().sort(function (a, b) { return a.bs - b.bs; });
      if (pts.length > 1) {
        g.appendChild(sv("polyline", {fill: "none", stroke: sr.color, "stroke-width": sr.dash ? 1.5 : 2,
          "stroke-dasharray": sr.dash ? "6 4" : null, "class": "line",
          points: pts.map(function (p) { return (x(p.bs) + sr.offset).toFixed(1) + "," + y(p.y).toFixed(1); }).join(" ")}));
      }
      pts.forEach(function (p) {
        var cx = x(p.bs) + sr.offset, cy = y(p.y);
        if (p.low !== null && p.low !== undefined && p.high !== null && p.high !== undefined) {
          g.appendChild(sv("path", {d: "M" + (cx - 3) + "," + y(p.high) + "h6M" + cx + "," + y(p.high) + "V" + y(p.low) +
                                       "M" + (cx - 3) + "," + y(p.low) + "h6", stroke: sr.color, "stroke-width": 1.5,
                                    fill: "none", "class": "interval"}));
        }
        var fill = p.hollow ? "#ffffff" : sr.color, mark;
        if (sr.shape === "diamond") {
          mark = sv("path", {d: "M" + cx + "," + (cy - 5) + "l5,5l-5,5l-5,-5z", fill: "#ffffff", stroke: sr.color,
                             "stroke-width": 1.5});
        } else {
          mark = sv("circle", {cx: cx, cy: cy, r: 4.5, fill: fill, stroke: sr.color, "stroke-width": p.hollow ? 2 : 1});
        }
        var point = sv("g", {"class": "point" + (p.hollow ? " assumed" : "") + (p.star ? " best" : ""),
                             "data-bs": p.bs, "data-y": p.y, "data-x": cx.toFixed(2), "data-run": sr.run});
        point.appendChild(mark);
        if (p.star) {
          var star = [], k;
          for (k = 0; k < 10; k++) {
            var r = k % 2 ? 4.5 : 11, a = Math.PI / 5 * k - Math.PI / 2;
            star.push((cx + r * Math.cos(a)).toFixed(1) + "," + (cy + r * Math.sin(a)).toFixed(1));
          }
          point.appendChild(sv("polygon", {points: star.join(" "), fill: sr.color, stroke: "#222", "stroke-width": 1,
                                           "class": "star"}));
        }
        point.appendChild(sv("title", null, p.tip));
        g.appendChild(point);
      });
      svg.appendChild(g);
    });
    (spec.crossings || []).forEach(function (c) {  // a ring on the reference line, a dotted drop to the axis
      var cx = x(c.bs) + c.offset, cy = y(spec.reference);
      var g = sv("g", {"class": "crossover", "data-run": c.run, "data-bs": c.bs, "data-x": cx.toFixed(2)});
      g.appendChild(sv("line", {x1: cx, x2: cx, y1: cy + 6, y2: bottom, stroke: c.color, "stroke-width": 1.2,
                                "stroke-dasharray": "2 3"}));
      g.appendChild(sv("circle", {cx: cx, cy: cy, r: 6.5, fill: "none", stroke: c.color, "stroke-width": 2.5}));
      g.appendChild(sv("title", null, c.tip));
      svg.appendChild(g);
    });
    var box = h("figure", {"class": "chart", "data-chart": name}, h("figcaption", {text: spec.title}));
    box.appendChild(svg);
    box.appendChild(legend(spec.legend));
    parent.appendChild(box);
    window.spanfix.charts.push(name);
    return box;
  }

  /* A chart's legend, in HTML under it: [{label, color, dash, shape, hollow, star}]. */
  function legend(items) {
    var ul = h("ul", {"class": "legend"});
    items.forEach(function (item) {
      var icon = sv("svg", {width: 26, height: 14, viewBox: "0 0 26 14", "aria-hidden": "true"});
      if (item.line !== false) {
        icon.appendChild(sv("line", {x1: 1, x2: 25, y1: 7, y2: 7, stroke: item.color, "stroke-width": 2,
                                     "stroke-dasharray": item.dash ? "4 3" : null}));
      }
      if (item.interval) icon.appendChild(sv("path", {d: "M10,2h6M13,2V12M10,12h6", stroke: item.color, "stroke-width": 1.5,
                                                     fill: "none"}));
      else if (item.star) icon.appendChild(sv("polygon", {points: "13,1 15,5.5 20,6 16,9 17.5,13.5 13,11 8.5,13.5 10,9 6,6 11,5.5",
                                                     fill: item.color, stroke: "#222", "stroke-width": 0.8}));
      else if (item.shape === "diamond") icon.appendChild(sv("path", {d: "M13,2l5,5l-5,5l-5,-5z", fill: "#fff", stroke: item.color,
                                                                     "stroke-width": 1.5}));
      else if (item.shape) icon.appendChild(sv("circle", {cx: 13, cy: 7, r: 4, fill: item.hollow ? "#fff" : item.color,
                                                          stroke: item.color, "stroke-width": item.hollow ? 2 : 1}));
      ul.appendChild(h("li", {"data-legend": item.key || item.label}, icon, h("span", {text: item.label})));
    });
    return ul;
  }

  function marks(p) {
    return [p.best ? "best at this batch size" : "", p.loses ? "loses to plain decoding" : "",
            p.cannot_tell ? "can't tell whether it pays" : ""].filter(function (t) { return t; }).join(", ");
  }

  function charts(root) {
    var s = section(root, "speedup", "Which configuration pays most?",
      "Each run's speedup over plain decoding at each batch size: accept length × plain decode iteration / " +
      "speculative decode iteration, like for like, on the run's own clock (the one that bounds its decode " +
      "iteration), with its 95% interval as a bar: a run pays where the bar lies above 1, loses where it lies " +
      "below, and cannot tell where it crosses 1. Plain decoding is the dashed line at 1. Stars mark the best run " +
      "at each batch size; a ring on the line at 1 marks a run's crossover, the batch size at which its speedup " +
      "is 1, estimated between the largest batch size that pays and the smallest that loses (linear in log bs). " +
      "On the right, each run's accept length (solid: a filled dot where it was measured at " +
      "that batch size, a hollow one where it is assumed, one figure over every batch size) against its " +
      "break-even accept length (dashed, the accept length at which the speedup is 1): speculation pays where " +
      "the solid line is above its dashed one. Runs at one batch size sit side by side around it. A point a " +
      "run could not be compared at is missing; the table says why. Hover a point for its figures.");
    if (data.best) s.appendChild(h("p", {"class": "verdict", text: data.best}));
    if (!data.batch_sizes.length) { s.appendChild(h("p", {text: "No batch size was measured."})); return; }
    var pair = h("div", {"class": "pair"});
    var left = h("div", {"class": "half"}), right = h("div", {"class": "half"});
    pair.appendChild(left);
    pair.appendChild(right);
    s.appendChild(pair);
    var shown = data.runs.filter(function (run) {
      return !run.plain && (drawn(run, "speedup").length || drawn(run, "accept_length").length || drawn(run, "break_even").length);
    });
    var gap = 1e9, sizes = data.batch_sizes, span = Math.log(sizes[sizes.length - 1]) - Math.log(sizes[0]);
    for (var k = 1; k < sizes.length; k++) {
      gap = Math.min(gap, (Math.log(sizes[k]) - Math.log(sizes[k - 1])) / span * (W - M.l - M.r - 72));
    }
    var step = shown.length > 1 ? Math.min(DODGE, (gap === 1e9 ? 60 : 0.7 * gap) / (shown.length - 1)) : 0;
    var speedups = [], accepts = [], anyAssumed = false;
    var runItems = [], crossings = [];
    shown.forEach(function (run, index) {
      var offset = (index - (shown.length - 1) / 2) * step;
      runItems.push({label: run.name, color: run.color, key: "run"});
      var reach = run.reach;
      if (reach && reach.crossover !== null) {
        crossings.push({bs: reach.crossover, offset: offset, color: run.color, run: run.name,
                        tip: run.name + "\ncrossover near bs " + fmt(reach.crossover, 1) + " (speedup 1, estimated: " +
                             reach.crossover_method + ")"});
      }
      speedups.push({name: run.name, run: run.name, color: run.color, offset: offset, points: drawn(run, "speedup").map(function (p) {
        return {bs: p.bs, y: p.speedup, low: p.speedup_low, high: p.speedup_high, star: p.best,
                tip: run.name + "\nbs " + p.bs + ": speedup " + fmt(p.speedup, 2) + " (" + (p.speedup_low === null ? "no interval" :
                     "95%: " + fmt(p.speedup_low, 2) + "\u2013" + fmt(p.speedup_high, 2)) + ")\nbreak-even " +
                     fmt(p.break_even, 2) + ", accepted " + fmt(p.accept_length, 2) + (p.accept_assumed ? " (assumed)" : "") +
                     (marks(p) ? "\n" + marks(p) : "")};
      })});
      accepts.push({name: run.name + ": accept length", run: run.name, color: run.color, offset: offset,
                    points: drawn(run, "accept_length").map(function (p) {
        anyAssumed = anyAssumed || p.accept_assumed;
        return {bs: p.bs, y: p.accept_length, hollow: p.accept_assumed,
                tip: run.name + "\nbs " + p.bs + ": accept length " + fmt(p.accept_length, 2) +
                     (p.accept_assumed ? ", assumed (" + p.accept_source + ": one figure over every batch size)" :
                      ", measured at this batch size (" + p.accept_source + ")")};
      })});
      accepts.push({name: run.name + ": break-even", run: run.name, color: run.color, offset: offset, dash: true,
                    shape: "diamond", points: drawn(run, "break_even").map(function (p) {
        return {bs: p.bs, y: p.break_even, tip: run.name + "\nbs " + p.bs + ": break-even accept length " + fmt(p.break_even, 2)};
      })});
    });
    var grey = "#555";
    plot(left, "compare-speedup", {title: "Speedup over plain decoding", ylabel: "speedup (× plain decoding)",
      reference: 1, series: speedups, crossings: crossings, legend: runItems.concat([
        {label: "plain decoding (speedup 1)", color: "#7f7f7f", dash: true}],
        crossings.length ? [{label: "crossover: speedup 1, estimated between the batch sizes around it", color: grey,
                             shape: "circle", hollow: true, line: false, key: "crossover"}] : [], [
        {label: "best at its batch size", color: grey, star: true, line: false},
        {label: "95% interval", color: grey, line: false, interval: true, key: "interval"}])});
    plot(right, "compare-accept", {title: "Accept length (solid) against break-even (dashed)",
      ylabel: "tokens per request per iteration", series: accepts, legend: runItems.concat([
        {label: "accept length, measured at that batch size", color: grey, shape: "circle", key: "measured"},
        {label: "accept length, assumed (one figure over every batch size)" + (anyAssumed ? "" : ": none here"),
         color: grey, shape: "circle", hollow: true, key: "assumed"},
        {label: "break-even accept length", color: grey, dash: true, shape: "diamond", key: "break-even"}])});
  }

  /* 3. The table, the verdicts, SGLang's sweep, budgets ---------------------------------------------- */

  function tables(root) {
    var s = section(root, "table", "Every run at every batch size",
      "The figures of spanfix compare (--format json has them exact). Best: the largest speedup at that batch size; " +
      "loses: slower than plain decoding (its 95% interval below 1); fastest: plain decoding, where no configuration " +
      "pays; accept*: not measured at that batch size, assumed; can't tell: the interval holds 1; not " +
      "comparable: a speculative iteration faster than a plain one (the captures ran under other conditions); a row " +
      "not compared says why instead of a figure.");
    s.appendChild(table(data.table));
    var v = section(root, "verdicts", "Verdicts", "Each run's verdict, as spanfix stats gives it against the plain run.");
    v.appendChild(list(data.verdicts, "verdicts"));
    if (data.budgets.length) {
      v.appendChild(h("h3", {text: "Budgets"}));
      v.appendChild(list(data.budgets, "budgets"));
    }
    if (data.sweep) {
      var w = section(root, "sweep", "Beside SGLang's sweep",
        "SGLang's scripts/playground/bench_speculative.py lines, matched to the runs by their settings and batch size.");
      if (data.sweep.table) w.appendChild(table(data.sweep.table));
      w.appendChild(list(data.sweep.lines, "sweep-lines"));
    }
    var said = data.warnings.map(function (w) { return "warning: " + w; })
      .concat(data.notes.map(function (n) { return "note: " + n; }));
    if (said.length) {
      var n = section(root, "notes", "Warnings and notes");
      n.appendChild(list(said, "warnings"));
    }
  }

  page.draw("page", function (payload, root) {
    data = payload;
    header(root);
    charts(root);
    tables(root);
    page.footer(root, data, null, "Charts drawn by this page as SVG, inline: this file makes no network request.");
  });
})();
