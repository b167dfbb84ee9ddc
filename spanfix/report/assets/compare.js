/* spanfix compare: builds the comparison page from the JSON payload (spanfix/report/compare_page.py) and draws
 * its charts with Plotly. Every run name and path is user data: it enters the document through textContent
 * only, and is escaped (esc) before Plotly sees it, since Plotly's labels are a small HTML dialect. */
(function () {
  "use strict";

  var page = window.spanfixPage, h = page.h, esc = page.esc, layout = page.layout, axis = page.axis,
      section = page.section, chart = page.chart;
  var data;

  function fmt(value, digits) { return value === null || value === undefined ? "-" : value.toFixed(digits); }

  /* The batch sizes on a log axis (they usually double), each one ticked. */
  function bsAxis() {
    var sizes = data.batch_sizes;
    var low = Math.min.apply(null, sizes), high = Math.max.apply(null, sizes);
    var pad = low === high ? 0.3 : 0.08 * (Math.log10(high) - Math.log10(low));
    return axis("batch size (requests per decode iteration)", {type: "log", tickvals: sizes,
      ticktext: sizes.map(String), range: [Math.log10(low) - pad, Math.log10(high) + pad]});
  }

  function table(spec) {
    var head = h("tr");
    var t = h("table", {"class": "data", id: spec.id, "data-table": spec.id});
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

  function drawn(run, key) {
    return run.points.filter(function (p) { return p[key] !== null && p[key] !== undefined; });
  }

  function charts(root) {
    var s = section(root, "speedup", "Which configuration pays most?",
      "Each run's speedup over plain decoding at each batch size: accept length × plain decode iteration / " +
      "speculative decode iteration, like for like, on the run's own clock (the one that bounds its decode " +
      "iteration), with its 95% interval as a bar: a run pays where the bar lies above 1, loses where it lies " +
      "below, and cannot tell where it crosses 1. Plain decoding is the line at 1. Stars mark the best run at " +
      "each batch size. On the right, each run's accept length (solid) against its break-even accept length " +
      "(dashed, the accept length at which the speedup is 1): speculation pays where the solid line is above " +
      "its dashed one. A point a run could not be compared at is missing; the table says why.");
    if (data.best) s.appendChild(h("p", {"class": "verdict", text: data.best}));
    if (!data.batch_sizes.length) { s.appendChild(h("p", {text: "No batch size was measured."})); return; }
    var pair = h("div", {"class": "pair"});
    var left = h("div", {"class": "half"}), right = h("div", {"class": "half"});
    pair.appendChild(left);
    pair.appendChild(right);
    s.appendChild(pair);
    var sizes = data.batch_sizes;
    var low = Math.min.apply(null, sizes), high = Math.max.apply(null, sizes);
    var speedups = [{type: "scatter", mode: "lines", name: "plain decoding (speedup 1)", x: [low, high], y: [1, 1],
                     line: {color: "#7f7f7f", dash: "dash", width: 1.5}, hoverinfo: "skip"}];
    var accepts = [];
    var best = {type: "scatter", mode: "markers", name: "best at its batch size", x: [], y: [], text: [],
                marker: {symbol: "star", size: 16, color: [], line: {color: "#222", width: 1}},
                hovertemplate: "<b>%{text}</b><br>bs %{x}: the best, speedup %{y:.2f}<extra></extra>"};
    data.runs.forEach(function (run) {
      if (run.plain) return;
      var name = esc(run.name);
      var points = drawn(run, "speedup");
      if (points.length) {
        speedups.push({type: "scatter", mode: "lines+markers", name: name, legendgroup: name,
          x: points.map(function (p) { return p.bs; }), y: points.map(function (p) { return p.speedup; }),
          error_y: {type: "data", symmetric: false, color: run.color, thickness: 1.5, width: 6,
                    array: points.map(function (p) { return p.speedup_high === null ? 0 : p.speedup_high - p.speedup; }),
                    arrayminus: points.map(function (p) { return p.speedup_low === null ? 0 : p.speedup - p.speedup_low; })},
          customdata: points.map(function (p) { return [fmt(p.break_even, 2), fmt(p.accept_length, 2),
                                                       [p.best ? "best at this batch size" : "",
                                                        p.loses ? "loses to plain decoding" : "",
                                                        p.cannot_tell ? "can't tell whether it pays" : ""]
                                                         .filter(function (t) { return t; }).join(", "),
                                                       p.speedup_low === null ? "no interval" :
                                                         "95%: " + fmt(p.speedup_low, 2) + "\u2013" + fmt(p.speedup_high, 2)]; }),
          marker: {color: run.color, size: 8}, line: {color: run.color, width: 2},
          hovertemplate: "<b>" + name + "</b><br>bs %{x}: speedup %{y:.2f} (%{customdata[3]})<br>break-even " +
                         "%{customdata[0]}, accepted %{customdata[1]}<br>%{customdata[2]}<extra></extra>"});
      }
      points.forEach(function (p) {
        if (p.best) { best.x.push(p.bs); best.y.push(p.speedup); best.marker.color.push(run.color); best.text.push(name); }
      });
      var accepted = drawn(run, "accept_length"), even = drawn(run, "break_even");
      if (accepted.length) {
        accepts.push({type: "scatter", mode: "lines+markers", name: name + ": accept length", legendgroup: name,
          x: accepted.map(function (p) { return p.bs; }), y: accepted.map(function (p) { return p.accept_length; }),
          marker: {color: run.color, size: 7}, line: {color: run.color, width: 2},
          hovertemplate: "<b>" + name + "</b><br>bs %{x}: accept length %{y:.2f}<extra></extra>"});
      }
      if (even.length) {
        accepts.push({type: "scatter", mode: "lines+markers", name: name + ": break-even", legendgroup: name,
          x: even.map(function (p) { return p.bs; }), y: even.map(function (p) { return p.break_even; }),
          marker: {color: run.color, size: 6, symbol: "diamond-open"}, line: {color: run.color, width: 1.5, dash: "dash"},
          hovertemplate: "<b>" + name + "</b><br>bs %{x}: break-even accept length %{y:.2f}<extra></extra>"});
      }
    });
    if (best.x.length) speedups.push(best);
    chart(left, "compare-speedup", speedups, layout({
      title: {text: "Speedup over plain decoding", x: 0, xanchor: "left", font: {size: 14}},
      xaxis: bsAxis(), yaxis: axis("speedup (× plain decoding)", {rangemode: "tozero"}), hovermode: "closest",
      margin: {l: 64, r: 16, t: 44, b: 110}}), 440);
    chart(right, "compare-accept", accepts, layout({
      title: {text: "Accept length (solid) against break-even (dashed)", x: 0, xanchor: "left", font: {size: 14}},
      xaxis: bsAxis(), yaxis: axis("tokens per request per iteration", {rangemode: "tozero"}), hovermode: "closest",
      margin: {l: 64, r: 16, t: 44, b: 110}}), 440);
  }

  /* 3. The table, the verdicts, SGLang's sweep, budgets ---------------------------------------------- */

  function tables(root) {
    var s = section(root, "table", "Every run at every batch size",
      "The figures of spanfix compare (--format json has them exact). Best: the largest speedup at that batch size; " +
      "loses: slower than plain decoding (its 95% interval below 1); can't tell: the interval holds 1; not " +
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
    page.footer(root, data);
  });
})();
