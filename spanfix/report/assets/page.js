/* spanfix's pages (the report, compare): what both are built with, loaded before the page's own script.
 * Every name from a trace or a run is user data: it enters the document through textContent only (h),
 * and is escaped (esc) before Plotly sees it, since Plotly's labels are a small HTML dialect. */
window.spanfixPage = (function () {
  "use strict";

  var FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, 'Helvetica Neue', Arial, sans-serif";
  var CONFIG = {displaylogo: false, responsive: true, modeBarButtonsToRemove: ["lasso2d", "select2d"]};
  var pending = [];
  // What the browser tests wait for and read: drawn once every chart is, or the error that stopped it.
  var state = window.spanfix = {drawn: false, charts: [], error: null};

  function h(tag, attrs) {
    var node = document.createElement(tag);
    var key;
    for (key in attrs || {}) {
      if (attrs[key] === undefined || attrs[key] === null) continue;
      if (key === "text") node.textContent = String(attrs[key]);
      else if (key === "class") node.className = attrs[key];
      else node.setAttribute(key, String(attrs[key]));
    }
    for (var i = 2; i < arguments.length; i++) add(node, arguments[i]);
    return node;
  }

  function add(node, child) {
    if (child === undefined || child === null || child === false) return;
    if (Array.isArray(child)) child.forEach(function (c) { add(node, c); });
    else if (typeof child === "string" || typeof child === "number") node.appendChild(document.createTextNode(String(child)));
    else node.appendChild(child);
  }

  /* A name for Plotly: its labels, legends, ticks and hovers read &, <, > as markup (<a href>, <b>, <br>).
   * Quotes as numeric entities: Plotly decodes those, and shows a named &quot; as it is written. */
  function esc(text) {
    return String(text).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;")
      .replace(/"/g, "&#34;").replace(/'/g, "&#39;");
  }

  function layout(extra) {
    var base = {
      font: {family: FONT, size: 12, color: "#222"},
      margin: {l: 64, r: 16, t: 44, b: 56},
      paper_bgcolor: "#ffffff", plot_bgcolor: "#ffffff",
      hoverlabel: {font: {family: FONT, size: 12}},
      // At the bottom of the figure, not at a fraction of the plot below it: an x axis whose tick
      // labels turn grows the bottom margin, and would run its title into such a legend.
      legend: {orientation: "h", x: 0, y: 0, yref: "container", yanchor: "bottom"}
    };
    for (var key in extra) base[key] = extra[key];
    return base;
  }

  function axis(title, extra) {
    var a = {title: {text: title, standoff: 8}, gridcolor: "#ececec", zerolinecolor: "#cfcfcf", linecolor: "#999",
             showline: true, ticks: "outside", tickcolor: "#999", automargin: true};
    for (var key in extra || {}) a[key] = extra[key];
    return a;
  }

  /* A section, in the document at once: Plotly sizes a chart by its container when it draws it. */
  function section(root, id, title, intro) {
    var s = h("section", {id: id, "class": "block"}, h("h2", {text: title}));
    if (intro) s.appendChild(h("p", {"class": "intro", text: intro}));
    root.appendChild(s);
    return s;
  }

  function chart(parent, name, traces, lay, height) {
    var div = h("div", {"class": "chart", "data-chart": name});
    div.style.height = height + "px";
    parent.appendChild(div);
    state.charts.push(name);
    pending.push(window.Plotly.newPlot(div, traces, lay, CONFIG));
    return div;
  }

  /* more: what this page's charts say of themselves, after what both pages say; charts: who draws them
   * (default: plotly.js). */
  function footer(root, data, more, charts) {
    root.appendChild(h("footer", {"class": "foot"},
      h("p", null, "Made by spanfix " + data.version + " with: ", h("code", {"class": "command", text: data.command})),
      h("p", {"class": "note", text: (charts || "Charts by plotly.js (MIT licence), inline: this file makes no network " +
        "request.") + (more ? " " + more : "")})));
  }

  /* Builds the page from its JSON payload: build(data, root) adds the sections; the page is drawn once
   * every chart is. Whatever fails is said at the top of the page, never a blank one. */
  function draw(what, build) {
    function fail(error) {
      state.error = String(error && error.stack || error);
      var box = h("div", {"class": "fatal", text: "The " + what + " could not be drawn: " + String(error)});
      document.body.insertBefore(box, document.body.firstChild);
      console.error(error);
    }
    try {
      build(JSON.parse(document.getElementById("spanfix-data").textContent), document.getElementById("report"));
      Promise.all(pending).then(function () {
        state.drawn = true;
        state.drawnAt = performance.now();
        if (performance.mark) performance.mark("spanfix-drawn");
        document.body.setAttribute("data-drawn", "true");
      }, fail);
    } catch (error) {
      fail(error);
    }
  }

  return {h: h, esc: esc, layout: layout, axis: axis, section: section, chart: chart, footer: footer, draw: draw};
})();
