/* spanfix report: builds the page from the JSON payload (spanfix/report/model.py) and draws its charts
 * with Plotly. Every name from a trace is user data: it enters the document through textContent only,
 * and is escaped (esc) before Plotly sees it, since Plotly's labels are a small HTML dialect. */
(function () {
  "use strict";

  var page = window.spanfixPage, h = page.h, esc = page.esc, layout = page.layout, axis = page.axis,
      section = page.section, chart = page.chart;
  var CLOCK_NAME = {cpu: "host", gpu: "device"};
  var data;

  function rgba(hex, alpha) {
    var n = parseInt(hex.slice(1), 16);
    return "rgba(" + ((n >> 16) & 255) + "," + ((n >> 8) & 255) + "," + (n & 255) + "," + alpha + ")";
  }

  function fmtUs(us) {
    if (us === null || us === undefined) return "-";
    if (Math.abs(us) < 1000) return us.toFixed(1) + " us";
    if (Math.abs(us) < 1e6) return (us / 1000).toFixed(3) + " ms";
    return (us / 1e6).toFixed(3) + " s";
  }

  function plural(n, one, many) { return n.toLocaleString("en-US") + " " + (n === 1 ? one : many); }

  function own(map, key) { return Object.prototype.hasOwnProperty.call(map, key) ? map[key] : null; }

  function stageColor(stage) { return own(data.colors.stage, stage) || "#555555"; }

  /* Tables: cells carry their exact value (data-value) and their text for people. */
  function table(spec, sortable) {
    var head = h("tr");
    var t = h("table", {"class": "data" + (sortable ? " sortable" : ""), id: spec.id, "data-table": spec.id});
    spec.columns.forEach(function (col, index) {
      var th = h("th", {text: col.label, title: col.hint, "data-key": col.key,
                        "class": col.numeric ? "num" : "txt"});
      if (sortable) {
        th.setAttribute("tabindex", "0");
        th.addEventListener("click", function () { sortBy(t, index, col.numeric); });
        th.addEventListener("keydown", function (e) { if (e.key === "Enter") sortBy(t, index, col.numeric); });
      }
      head.appendChild(th);
    });
    var body = h("tbody");
    spec.rows.forEach(function (row) {
      var tr = h("tr");
      row.forEach(function (cell, index) {
        var col = spec.columns[index];
        var td = h("td", {text: cell.t, title: cell.title, "data-key": col.key,
                          "class": (col.numeric ? "num" : "txt") + (cell.tone ? " tone-" + cell.tone : "")});
        var swatch = col.key === "stage" ? own(data.colors.stage, cell.v) : col.key === "part" ? own(data.colors.part, cell.v) : null;
        if (swatch) {
          var mark = h("span", {"class": "swatch", "aria-hidden": "true"});
          mark.style.backgroundColor = swatch;
          td.insertBefore(mark, td.firstChild);
        }
        if (cell.v !== undefined) td.setAttribute("data-value", typeof cell.v === "string" ? cell.v : JSON.stringify(cell.v));
        tr.appendChild(td);
      });
      body.appendChild(tr);
    });
    t.appendChild(h("thead", null, head));
    t.appendChild(body);
    var wrap = h("div", {"class": "table-wrap"}, t);
    if (spec.note) wrap.appendChild(h("p", {"class": "note", text: spec.note}));
    return wrap;
  }

  function sortBy(t, index, numeric) {
    var th = t.tHead.rows[0].cells[index];
    var ascending = th.getAttribute("aria-sort") === "descending";
    Array.prototype.forEach.call(t.tHead.rows[0].cells, function (c) { c.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
    var rows = Array.prototype.slice.call(t.tBodies[0].rows);
    rows.sort(function (a, b) {
      var x = a.cells[index].getAttribute("data-value"), y = b.cells[index].getAttribute("data-value");
      var result;
      if (numeric) {
        x = x === null || x === "null" ? -Infinity : Number(x);
        y = y === null || y === "null" ? -Infinity : Number(y);
        result = x - y;
      } else {
        result = String(a.cells[index].textContent).localeCompare(String(b.cells[index].textContent));
      }
      return ascending ? result : -result;
    });
    rows.forEach(function (r) { t.tBodies[0].appendChild(r); });
  }

  function defs(pairs) {
    var dl = h("dl", {"class": "facts"});
    pairs.forEach(function (p) {
      if (p === null) return;
      dl.appendChild(h("dt", {text: p[0]}));
      dl.appendChild(h("dd", {"class": p[2] || null}, p[1]));
    });
    return dl;
  }

  /* 1. Header ------------------------------------------------------------------------------------- */

  function header(root) {
    var hd = data.header;
    var top = h("header", {"class": "top"},
      h("h1", {text: data.title}),
      h("p", {"class": "sub"}, "Step spans of SGLang speculative decoding as ", h("code", {text: "spanfix stats"}),
        " measures them: " + plural(hd.steps, "step span", "step spans") + ", " +
        plural(hd.decode_iterations, "decode iteration", "decode iterations") + ", " +
        plural(hd.inputs.length, "input", "inputs") + (hd.ranks.length ? ", ranks " + hd.ranks.join(", ") : "") + "."));
    var nav = h("nav", {"class": "toc"});
    [["summary", "Summary"], ["stages", "Stages"], ["distributions", "Distributions"], ["timeline", "Iterations"],
     ["speculation", "Speculation"], ["ranks", "Ranks"], ["kernels", "Kernels"]].forEach(function (l) {
      nav.appendChild(h("a", {href: "#" + l[0], text: l[1]}));
    });
    top.appendChild(nav);
    root.appendChild(top);

    var s = section(root, "summary", "Summary");
    var inputs = h("ul", {"class": "inputs"});
    hd.inputs.forEach(function (input) {
      inputs.appendChild(h("li", null, h("code", {"class": "path", text: input.source}),
        " — " + plural(input.steps, "step span", "step spans") + ", " +
        plural(input.decode_iterations, "decode iteration", "decode iterations") +
        (input.ranks.length ? ", ranks " + input.ranks.join(", ") : ", no rank in its name or pids") +
        (hd.algorithms.length > 1 ? "; algorithm " + input.algorithm : "")));
    });
    var algos = h("div");
    hd.algorithms.forEach(function (a) {
      algos.appendChild(h("p", null, h("strong", {text: a.algorithm}),
        a.reasons.length ? " — because: " + a.reasons.join("; ") : " — nothing in the trace names it"));
    });
    var evidence = h("ul", {"class": "chips"});
    Object.keys(hd.decided_by).forEach(function (k) {
      evidence.appendChild(h("li", null, h("span", {"class": "chip-key", text: k}), " " + hd.decided_by[k].toLocaleString("en-US")));
    });
    if (!Object.keys(hd.decided_by).length) evidence.appendChild(h("li", {text: "no span was attributed"}));
    var amb = hd.ambiguous;
    var ambNode = h("div");
    if (amb.spans) {
      var reasons = h("ul", {"class": "reasons"});
      Object.keys(amb.reasons).forEach(function (k) {
        reasons.appendChild(h("li", null, amb.reasons[k].toLocaleString("en-US") + " × ", h("span", {text: k})));
      });
      var times = [];
      ["cpu", "gpu"].forEach(function (clock) {
        var t = amb.time[clock];
        if (t) times.push(fmtUs(t.total_us) + " on the " + CLOCK_NAME[clock] + " clock (" + (t.share * 100).toFixed(1) +
                          "% of step time)");
      });
      ambNode.appendChild(h("p", {"class": "bad"}, h("strong", {text: plural(amb.spans, "ambiguous span", "ambiguous spans")}),
        " — their names were left as written and their time is the row ", h("code", {text: "ambiguous"}),
        ", never a stage's" + (times.length ? ": " + times.join(", ") : "") + ". What was missing:"));
      ambNode.appendChild(reasons);
    } else {
      ambNode.appendChild(h("p", {"class": hd.steps ? "good" : null,
        text: hd.steps ? "none: every step span was attributed." : "none (no step spans)."}));
    }
    var warnings = null;
    if (hd.warnings.length) {
      warnings = h("ul", {"class": "warnings"});
      hd.warnings.forEach(function (w) { warnings.appendChild(h("li", {text: w})); });
    }
    var errors = null;
    if (hd.errors.length) {
      errors = h("ul", {"class": "errors"});
      hd.errors.forEach(function (e) { errors.appendChild(h("li", {text: e})); });
    }
    s.appendChild(defs([
      ["Inputs", inputs],
      ["Algorithm", algos],
      ["Decided by", h("div", null, evidence, h("p", {"class": "note",
        text: "Step spans each kind of evidence decided (docs/design.md, \"Telling draft from target\", lists the kinds)."}))],
      ["Ambiguous", ambNode, amb.spans ? "bad" : null],
      ["Baseline", hd.baseline === null ? h("span", {text: "none"}) : h("code", {"class": "path", text: hd.baseline})],
      hd.baseline_differences.length ? ["Baseline differs", (function () {
        var list = h("ul", {"class": "warnings"});
        hd.baseline_differences.forEach(function (d) { list.appendChild(h("li", {text: d})); });
        return h("div", null, list, h("p", {"class": "note", text: hd.plain_baseline
          ? "A capture without speculative decoding: it gives the speculation section its plain decode iteration " +
            "(speedup, break-even); its means are not a regression of these (check compares none with it)."
          : "Its means are of another kind of run: a change against it is not a regression of this one " +
            "(check skips such rules)."}));
      })(), "bad"] : null,
      errors ? ["Not used", errors, "bad"] : null,
      ["Warnings", warnings || h("span", {text: hd.notes.length ? "none (" + plural(hd.notes.length, "note", "notes") +
                                                  " below)" : "none"})],
      hd.notes.length ? ["Notes", (function () {  // stats' notes, every one, as stats prints them
        var list = h("ul", {"class": "warnings notes"});
        hd.notes.forEach(function (n) { list.appendChild(h("li", {text: n})); });
        return list;
      })()] : null
    ]));
    s.appendChild(keyFigures());
  }

  function cellOf(spec, row, key) {
    for (var i = 0; i < spec.columns.length; i++) if (spec.columns[i].key === key) return row[i];
    return null;
  }

  function keyFigures() {
    var cards = h("div", {"class": "cards"});
    function card(label, value) {
      cards.appendChild(h("div", {"class": "card"}, h("div", {"class": "card-label", text: label}),
                          h("div", {"class": "card-value", text: value})));
    }
    var spec = data.speculation;
    // With a verdict, every card is on its basis (its clock and batch sizes), the iteration's too.
    if (!(spec && spec.speculative && spec.cards_basis)) {
      data.iterations.forEach(function (t) {
        card("decode iteration, " + CLOCK_NAME[t.clock] + " mean", fmtUs(cellOf(t, t.rows[0], "mean_us").v));
      });
    }
    if (spec && spec.speculative) {
      spec.cards.forEach(function (c) { card(c[0], c[1]); });  // figures of the speculation table below
    } else {
      data.stages.forEach(function (t) {
        if (!t.rows.length) return;
        card("largest share of step-span time, " + CLOCK_NAME[t.clock], t.rows[0][0].t + " " + cellOf(t, t.rows[0], "share").t);
      });
    }
    if (data.ranks.slowest) card("slowest " + (data.ranks.key === "rank" ? "rank" : "input"), data.ranks.slowest.label);
    if (data.header.ambiguous.spans) card("ambiguous spans", data.header.ambiguous.spans.toLocaleString("en-US"));
    if (spec && spec.speculative && spec.cards_basis) {
      return h("div", null, cards, h("p", {"class": "note cards-basis", text: spec.cards_basis}));
    }
    return cards;
  }

  /* 2. Stage tables -------------------------------------------------------------------------------- */

  function stages(root) {
    var s = section(root, "stages", "Stages",
      "The stats table: count, total, mean and percentiles (nearest rank, always a measured value) of every " +
      "stage's step spans, on each clock. Click a column to sort. Hover a time for its exact value in us.");
    data.stages.forEach(function (t) {
      s.appendChild(h("h3", {text: t.title}));
      s.appendChild(table(t, true));
    });
    if (!data.stages.length) s.appendChild(h("p", {text: "No step spans."}));
  }

  /* 3. Distributions ------------------------------------------------------------------------------- */

  function distributions(root) {
    var d = data.distributions;
    var intro = "Step durations of each stage. Histogram: share of the stage's spans per bin (the bins are shared " +
      "by all stages of a clock); CDF: fraction of spans at or below a duration, its top ranks drawn densely.";
    if (d.baseline_kind === "trace") intro += " Dashed: the baseline trace's distribution.";
    if (d.baseline_kind === "saved") intro += " ×: the baseline's p50, p90, p99 and max (a saved stats result keeps no distribution).";
    var s = section(root, "distributions", "Distributions", intro);
    d.clocks.forEach(function (c) {
      var row = h("div", {"class": "pair"});
      s.appendChild(h("h3", {text: "Step durations, " + c.title}));
      s.appendChild(row);
      var scale = c.log ? ", log scale" : "";
      var hist = [], cdf = [];
      c.stages.forEach(function (st) {
        var color = stageColor(st.stage);
        var name = esc(st.stage);
        hist.push({type: "scatter", mode: "lines", name: name, legendgroup: name, x: st.histogram.x,
          y: st.histogram.y, customdata: st.histogram.customdata, fill: "tozeroy", fillcolor: rgba(color, 0.14),
          line: {color: color, width: 2, shape: "hvh"},
          hovertemplate: "<b>%{fullData.name}</b><br>%{customdata[1]} – %{customdata[2]} " + c.unit +
            "<br>%{customdata[0]} spans, %{y:.2f}%<extra></extra>"});
        cdf.push({type: "scatter", mode: "lines", name: name, legendgroup: name, x: st.cdf.x, y: st.cdf.y,
          line: {color: color, width: 2, shape: "hv"},
          hovertemplate: "<b>%{fullData.name}</b><br>%{y:.2%} of " + st.cdf.count + " spans ≤ %{x} " + c.unit + "<extra></extra>"});
        if (st.baseline) {
          hist.push({type: "scatter", mode: "lines", name: name + " baseline", legendgroup: name, x: st.baseline.histogram.x,
            y: st.baseline.histogram.y, customdata: st.baseline.histogram.customdata,
            line: {color: color, width: 1.5, dash: "dash", shape: "hvh"},
            hovertemplate: "<b>%{fullData.name}</b><br>%{customdata[1]} – %{customdata[2]} " + c.unit +
              "<br>%{customdata[0]} spans, %{y:.2f}%<extra></extra>"});
          cdf.push({type: "scatter", mode: "lines", name: name + " baseline", legendgroup: name, x: st.baseline.cdf.x,
            y: st.baseline.cdf.y, line: {color: color, width: 1.5, dash: "dash", shape: "hv"},
            hovertemplate: "<b>%{fullData.name}</b><br>%{y:.2%} of " + st.baseline.cdf.count + " spans ≤ %{x} " + c.unit +
              "<extra></extra>"});
        }
        if (st.baseline_percentiles) {
          cdf.push({type: "scatter", mode: "markers", name: name + " baseline p50/p90/p99/max", legendgroup: name,
            x: st.baseline_percentiles.x, y: st.baseline_percentiles.y,
            marker: {color: color, symbol: "x-thin-open", size: 10, line: {width: 2, color: color}},
            hovertemplate: "<b>%{fullData.name}</b><br>%{y:.0%}: %{x} " + c.unit + "<extra></extra>"});
        }
      });
      var xType = c.log ? "log" : "linear";
      var xExtra = {type: xType, range: c.range};
      if (c.ticks) {
        xExtra.tickvals = c.ticks;
        xExtra.ticktext = c.ticks.map(function (t) { return t.toLocaleString("en-US"); });
      }
      var left = h("div", {"class": "half"}), right = h("div", {"class": "half"});
      row.appendChild(left);
      row.appendChild(right);
      chart(left, "dist-" + c.clock + "-hist", hist, layout({
        title: {text: "Histogram, " + CLOCK_NAME[c.clock] + " clock", x: 0, xanchor: "left", font: {size: 14}},
        xaxis: axis("step duration (" + c.unit + ")" + scale, xExtra),
        yaxis: axis("share of the stage's spans (%)", {rangemode: "tozero"}), hovermode: "closest"}), 380);
      chart(right, "dist-" + c.clock + "-cdf", cdf, layout({
        title: {text: "CDF, " + CLOCK_NAME[c.clock] + " clock", x: 0, xanchor: "left", font: {size: 14}},
        xaxis: axis("step duration (" + c.unit + ")" + scale, xExtra),
        yaxis: axis("fraction of spans ≤ duration", {range: [0, 1.02], tickformat: ".0%"}), hovermode: "closest"}), 380);
    });
    if (!d.clocks.length) s.appendChild(h("p", {text: "No step spans."}));
  }

  /* 4. Iteration timeline --------------------------------------------------------------------------- */

  function timeline(root) {
    var tl = data.timeline;
    var s = section(root, "timeline", "Decode iterations over capture time",
      "Every decode iteration as a bar of its parts, placed at its host start: warm-up, stalls and drift stand out. " +
      "Hover a bar for the iteration's steps and times. On the device clock an iteration lasts from the first start " +
      "to the last end of the device work it queued; idle is when nothing of the rank ran. Beyond " +
      tl.max_bars.toLocaleString("en-US") + " iterations per rank, consecutive iterations share one bar (the mean " +
      "of each part) and a thin black line follows the slowest of them; the tables below are exact.");
    var note = leftOut(tl.drawn, data.ranks.key);
    if (note) s.appendChild(note);
    tl.clocks.forEach(function (c) {
      s.appendChild(h("h3", {text: "Decode iterations, " + c.title}));
      var n = c.series.length;
      var gap = n > 1 ? 0.1 / (n - 1) * Math.min(n - 1, 3) / 3 + 0.04 : 0;
      var rowH = (1 - gap * (n - 1)) / n;
      var traces = [];
      var yf = c.unit === "us" ? ".1f" : ".3f";
      var lay = layout({barmode: "stack", bargap: 0.15, hovermode: "x unified", showlegend: true,
                        legend: {orientation: "h", x: 0, y: 1.0, yanchor: "bottom", traceorder: "normal"},
                        margin: {l: 84, r: 16, t: 56, b: 56}});
      c.series.forEach(function (sr, i) {
        var suffix = i === 0 ? "" : String(i + 1);
        var top = 1 - i * (rowH + gap);
        var named = tl.labelled || n > 1;
        var yTitle = (named ? "<b>" + esc(sr.label) + "</b><br>" : "") + "duration (" + c.unit + ")" +
          (sr.bucket > 1 ? "<br>" + sr.bucket + " iterations a bar" : "");
        lay["yaxis" + suffix] = axis(yTitle, {domain: [top - rowH, top], rangemode: "tozero", anchor: "x" + suffix});
        lay["xaxis" + suffix] = axis(i === n - 1 ? "capture time (ms from the trace's first event)" : "", {
          anchor: "y" + suffix, matches: i === 0 ? undefined : "x", showticklabels: i === n - 1});
        var width = medianGap(sr.x) * 0.85;
        c.parts.forEach(function (part, j) {
          var trace = {type: "bar", name: part, legendgroup: part, showlegend: i === 0, x: sr.x, y: sr.parts[part],
            xaxis: "x" + suffix, yaxis: "y" + suffix, marker: {color: own(data.colors.part, part), line: {width: 0}},
            hovertemplate: part + ": %{y:" + yf + "} " + c.unit + "<extra></extra>"};
          if (width > 0) trace.width = width;
          if (j === 0) {
            trace.text = sr.hover_markup;
            trace.textposition = "none";
            trace.hovertemplate = "%{text}<br>" + part + ": %{y:" + yf + "} " + c.unit + "<extra></extra>";
          }
          traces.push(trace);
        });
        if (sr.slowest) {
          traces.push({type: "scatter", mode: "lines", name: "slowest iteration of a bar", legendgroup: "slowest",
            showlegend: i === 0, x: sr.slowest.x, y: sr.slowest.y, xaxis: "x" + suffix, yaxis: "y" + suffix,
            line: {color: "rgba(0,0,0,0.55)", width: 1, shape: "hvh"},
            hovertemplate: "slowest: %{y:" + yf + "} " + c.unit + "<extra></extra>"});
        }
      });
      chart(s, "timeline-" + c.clock, traces, lay, 110 + n * (n > 4 ? 130 : 190));
    });
    if (!tl.clocks.length) s.appendChild(h("p", {text: "No decode iteration (a decode iteration is a scheduler.run_batch span, " +
      "or a draft ... draft_extend window, that holds a VERIFY step)."}));
    data.iterations.forEach(function (t) {
      s.appendChild(h("h3", {text: t.title}));
      s.appendChild(table(t, false));
    });
  }

  /* Past a few dozen ranks the charts draw the slowest (report/rank_comparison.py: drawn_ranks). */
  function leftOut(drawn, key) {
    if (!drawn || !drawn.left_out) return null;
    var what = key === "file" ? "inputs" : "ranks";
    return h("p", {"class": "callout", text: plural(drawn.of, key === "file" ? "input" : "rank", what) + ": the charts " +
      "draw the " + (drawn.of - drawn.left_out).toLocaleString("en-US") + " slowest, by " + drawn.by + "; the other " +
      drawn.left_out.toLocaleString("en-US") + " are left out of them (spanfix stats --by " + (key || "rank") +
      " lists every one)."});
  }

  function medianGap(xs) {
    var gaps = [];
    for (var i = 1; i < xs.length; i++) if (xs[i] > xs[i - 1]) gaps.push(xs[i] - xs[i - 1]);
    if (!gaps.length) return 0;
    gaps.sort(function (a, b) { return a - b; });
    return gaps[Math.floor(gaps.length / 2)];
  }

  /* 4b. Speculation --------------------------------------------------------------------------------- */

  function speculation(root) {
    var spec = data.speculation;
    var s = section(root, "speculation", "Speculation: does it pay?",
      "The draft model's whole cost (every draft pass, CUDA-graph replays included, whether or not a step span " +
      "surrounds it), the accept length and where it came from, time per token, and against a plain twin (the " +
      "same server without speculation) the speedup (accept length × plain decode iteration / speculative " +
      "iteration, like for like on one clock) and the break-even accept length (speculative iteration / plain " +
      "decode iteration). The verdict reads the clock that bounds the decode iteration. docs/stats.md defines " +
      "each figure.");
    if (!spec) { s.appendChild(h("p", {text: "No speculation figures."})); return; }
    if (!spec.speculative) { s.appendChild(h("p", {text: spec.line})); return; }
    if (spec.verdict) { s.appendChild(h("p", {"class": "verdict", text: spec.verdict})); }
    spec.tables.forEach(function (t) {
      s.appendChild(h("h3", {text: t.title}));
      s.appendChild(table(t, false));
    });
    var notes = h("ul", {"class": "warnings"});
    spec.notes.forEach(function (n) { notes.appendChild(h("li", {text: n})); });
    s.appendChild(notes);
    var known = spec.series.filter(function (sr) { return sr.known > 0; });
    if (!known.length) {
      s.appendChild(h("p", {"class": "note", text: "No decode iteration whose accept length the trace tells (the " +
        "notes say why): no chart of it over time."}));
      return;
    }
    var traces = known.map(function (sr) {
      return {type: "scatter", mode: "lines+markers", name: esc(sr.label), x: sr.x, y: sr.y, connectgaps: false,
        marker: {size: 5}, line: {width: 1.5},
        hovertemplate: "<b>" + esc(sr.label) + "</b><br>%{x:,.3f} ms: accept length %{y:.2f}<extra></extra>"};
    });
    chart(s, "speculation-accept", traces, layout({
      title: {text: "Accept length per decode iteration (trace annotations; gaps: unknown)", x: 0, xanchor: "left",
              font: {size: 14}},
      xaxis: axis("capture time (ms from the trace's first event)"),
      yaxis: axis("tokens per request per iteration", {rangemode: "tozero"}), hovermode: "closest"}), 360);
  }

  /* 5. Ranks ---------------------------------------------------------------------------------------- */

  function ranks(root) {
    var r = data.ranks;
    var s = section(root, "ranks", "Ranks");
    if (!r.key) {
      s.appendChild(h("p", {"class": "intro", text: "One rank (" + (r.labels[0] || "no rank") + "): nothing to compare. " +
        "Give every rank's file, or a merged trace, to see them side by side."}));
        return;
    }
    s.appendChild(h("p", {"class": "intro", text: "Each stage's step durations per " + (r.key === "rank" ? "rank" : "input") +
      ", side by side. Box: p25 to p75, the line the median, the dashed line the mean; whiskers p1 to p99; ◇ the max."}));
    var skipped = leftOut(r.drawn, r.key);
    if (skipped) s.appendChild(skipped);
    if (r.unranked) s.appendChild(h("p", {"class": "callout", text: "Slowest input: " + r.unranked + "."}));
    if (r.slowest) {
      s.appendChild(h("p", {"class": "callout"}, "Slowest " + (r.key === "rank" ? "rank" : "input") + ": ",
        h("strong", {text: r.slowest.label}), " — " + r.slowest.by + ": " + fmtUs(r.slowest.value_us) + ", against " +
        fmtUs(r.slowest.fastest_value_us) + " for ", h("span", {text: r.slowest.fastest}),
        " (" + (r.slowest.fastest_value_us ? "+" + ((r.slowest.value_us / r.slowest.fastest_value_us - 1) * 100).toFixed(1) + "%" : "-") + ")."));
    }
    r.clocks.forEach(function (c) {
      s.appendChild(h("h3", {text: "Per rank, " + c.title}));
      var n = c.stages.length;
      var cols = Math.min(n, 4), rows = Math.ceil(n / cols);
      var traces = [], annotations = [];
      var lay = layout({showlegend: false, hovermode: "closest", margin: {l: 64, r: 16, t: 30, b: 40}});
      c.stages.forEach(function (st, i) {
        var suffix = i === 0 ? "" : String(i + 1);
        var col = i % cols, row = Math.floor(i / cols);
        var x0 = col / cols + 0.045, x1 = (col + 1) / cols - 0.01;
        var y1 = 1 - row / rows - 0.09 / rows, y0 = 1 - (row + 1) / rows + 0.08 / rows;
        lay["xaxis" + suffix] = axis("", {domain: [x0, x1], anchor: "y" + suffix, type: "category"});
        lay["yaxis" + suffix] = axis(col === 0 ? "step duration (" + c.unit + ")" : "", {domain: [y0, y1], anchor: "x" + suffix,
                                                                                      rangemode: "tozero"});
        var color = stageColor(st.stage);
        var ticks = st.x.map(esc);  /* category labels are Plotly markup too: a file name is text */
        traces.push({type: "box", name: esc(st.stage), x: ticks, q1: st.q1, median: st.median, q3: st.q3,
          lowerfence: st.lowerfence, upperfence: st.upperfence, mean: st.mean, boxmean: true, boxpoints: false,
          xaxis: "x" + suffix, yaxis: "y" + suffix, marker: {color: color}, line: {color: color},
          fillcolor: rgba(color, 0.25), hoverinfo: "x+y"});
        traces.push({type: "scatter", mode: "markers", name: esc(st.stage) + " max", x: ticks, y: st.max,
          xaxis: "x" + suffix, yaxis: "y" + suffix, marker: {symbol: "diamond-open", size: 8, color: color},
          hovertemplate: "%{x}: max %{y} " + c.unit + "<extra></extra>"});
        var title = "<b>" + esc(st.stage) + "</b>" + (st.slowest ? " — slowest " + esc(st.slowest.label) : "");
        annotations.push({text: title, xref: "paper", yref: "paper", x: x0, y: y1 + 0.02 / rows, xanchor: "left",
                          yanchor: "bottom", showarrow: false, font: {size: 12}});
      });
      lay.annotations = annotations;
      chart(s, "ranks-" + c.clock, traces, lay, 60 + rows * 280);
    });
    if (r.table) s.appendChild(table(r.table, true));
  }

  /* 6. Kernels -------------------------------------------------------------------------------------- */

  function kernels(root) {
    var k = data.kernels;
    var s = section(root, "kernels", "Kernels");
    if (!k || !k.groups.length) {
      s.appendChild(h("p", {"class": "intro", text: "No device view: the inputs hold no kernels joined to step spans."}));
        return;
    }
    s.appendChild(h("p", {"class": "intro", text: "Where each stage's and each iteration part's device busy time went: by " +
      "category (SGLang's kernel classes, first match wins), then the top " + k.top + " kernels by device time. " +
      "Hover a kernel for its full name. Kernels on overlapping streams can add up to more than 100%."}));
    var labels = k.groups.map(function (g) { return esc(g.label); });
    var traces = k.categories.map(function (cat) {
      return {type: "bar", orientation: "h", name: esc(cat), y: labels,
        x: k.groups.map(function (g) { return g.categories[cat] === undefined || g.categories[cat] === null ? 0 :
                                             Math.round(g.categories[cat] * 10000) / 100; }),
        marker: {color: own(data.colors.category, cat) || "#555555"},
        hovertemplate: "%{y}: " + esc(cat) + " %{x:.1f}%<extra></extra>"};
    });
    chart(s, "kernels-categories", traces, layout({barmode: "stack", hovermode: "closest",
      title: {text: "Kernel categories: share of device busy time", x: 0, xanchor: "left", y: 0.98, yanchor: "top",
             font: {size: 14}},
      xaxis: axis("share of the group's device busy time (%)", {rangemode: "tozero"}),
      yaxis: axis("", {autorange: "reversed", type: "category"}),
      legend: {orientation: "h", x: 0, y: 1.0, yanchor: "bottom", traceorder: "normal"},
      margin: {l: 140, r: 16, t: 72, b: 50}}), 150 + 34 * k.groups.length);
    var grid = h("div", {"class": "grid"});
    k.groups.forEach(function (g) {
      grid.appendChild(h("div", {"class": "cell"}, h("h4", {text: g.table.title}), table(g.table, true)));
    });
    s.appendChild(grid);
  }

  page.draw("report", function (payload, root) {
    data = payload;
    header(root);
    stages(root);
    distributions(root);
    timeline(root);
    speculation(root);
    ranks(root);
    kernels(root);
    page.footer(root, data, "Tables are exact; charts draw series thinned for drawing.");
  });
})();
