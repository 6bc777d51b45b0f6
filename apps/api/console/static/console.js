// finagent console: pages that keep themselves current without reloading. Every page works
// without scripts (the server renders it whole, and an unfinished one refreshes itself from a
// <noscript> meta tag); these only poll small JSON endpoints and redraw the parts that change.
//
// - [data-poll="URL"]: a status in a list, from URL (status.json) every 2 s until terminal.
// - [data-live="URL"][data-kind=analysis|run|backtest]: the page's live section, from URL
//   (live.json); when the work is finished the page fetches itself again and swaps its <main>
//   in (no reload), then tells screen readers through #announce.
// - [data-since="ISO time"]: a clock of a running step, ticked every second on the server's time.
(function () {
  "use strict";

  var STEP_LABELS = { queued: "Queued", research: "Research", analysis: "Analysis",
    recommendation: "Recommendation", review: "Review", done: "Done" };
  var STATE_WORDS = { done: "done", running: "running", waiting: "waiting for a worker",
    pending: "not started", failed: "failed" };
  var clockSkew = 0; // server time minus this browser's time, ms (from live.json's "now")

  function getJSON(url) {
    return fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (r) { return r.ok ? r.json() : Promise.reject(new Error("HTTP " + r.status)); });
  }

  // the same words as apps/api/console/progress.py duration_text
  function duration(seconds) {
    if (seconds === null || seconds === undefined) { return ""; }
    seconds = Math.max(0, seconds);
    if (seconds < 1) { return seconds.toFixed(2) + " s"; }
    if (seconds < 10) { return seconds.toFixed(1) + " s"; }
    if (seconds < 60) { return Math.round(seconds) + " s"; }
    var whole = Math.floor(seconds);
    if (whole < 3600) { return Math.floor(whole / 60) + " min " + String(whole % 60).padStart(2, "0") + " s"; }
    return Math.floor(whole / 3600) + " h " + String(Math.floor(whole % 3600 / 60)).padStart(2, "0") + " min";
  }

  function tickClocks() {
    document.querySelectorAll("[data-since]").forEach(function (el) {
      var since = Date.parse(el.dataset.since);
      if (!isNaN(since)) { el.textContent = duration((Date.now() + clockSkew - since) / 1000); }
    });
  }

  function announce(text) {
    var box = document.getElementById("announce");
    if (box) { box.textContent = text; }
  }

  function el(tag, attrs, text) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) { if (attrs[k] !== null && attrs[k] !== undefined) { node.setAttribute(k, attrs[k]); } });
    if (text !== undefined && text !== null) { node.textContent = text; }
    return node;
  }

  // Fetch this page again and put its <main> in place of ours: the finished analysis's report,
  // the run's digest. The HTML is the server's own page (escaped by its templates), as a
  // reload would show it.
  function swapMain(message) {
    return fetch(window.location.href, { credentials: "same-origin", headers: { Accept: "text/html" } })
      .then(function (r) { return r.ok ? r.text() : Promise.reject(new Error("HTTP " + r.status)); })
      .then(function (html) {
        var fresh = new DOMParser().parseFromString(html, "text/html").getElementById("main");
        var main = document.getElementById("main");
        if (!fresh || !main) { window.location.reload(); return; }
        main.innerHTML = fresh.innerHTML;
        init(main);
        document.dispatchEvent(new CustomEvent("console:updated"));
        announce(message);
      })
      .catch(function () { window.location.reload(); });
  }

  // --- statuses in lists ------------------------------------------------------------------
  function watchStatus(node) {
    var terminal = (node.dataset.terminal || "done,failed").split(",");
    function tick() {
      getJSON(node.dataset.poll).then(function (a) {
        if (node.textContent !== a.status) { node.textContent = a.status; }
        node.className = "status status-" + a.status;
        if (terminal.indexOf(a.status) < 0) { window.setTimeout(tick, 2000); }
      }).catch(function () { window.setTimeout(tick, 5000); });
    }
    window.setTimeout(tick, 1000);
  }

  // --- the analysis page ------------------------------------------------------------------
  function renderSteps(list, steps) {
    var items = steps.map(function (s) {
      var failedEnd = s.name === "done" && s.state === "failed";
      var li = el("li", { "class": "step step-" + s.state, "data-step": s.name,
        "aria-current": s.state === "running" || s.state === "waiting" ? "step" : null });
      li.appendChild(el("span", { "class": "step-name" }, failedEnd ? "Failed" : STEP_LABELS[s.name] || s.name));
      li.appendChild(el("span", { "class": "step-state" }, STATE_WORDS[s.state] || s.state));
      var time = s.elapsed + (s.passes > 1 ? " (" + s.passes + " passes)" : "");
      li.appendChild(el("span", { "class": "step-time", "data-since": s.since }, time));
      return li;
    });
    list.replaceChildren.apply(list, items);
  }

  function timelineRow(e) {
    var tr = el("tr", { "data-key": e.key, id: e.anchor, "class": e.error ? "failed" : null });
    tr.appendChild(el("td", {}, e.time));
    tr.appendChild(el("td", {}, e.kind));
    tr.appendChild(el("td", {}, e.stage));
    var name = el("td");
    name.appendChild(el("code", {}, e.name));
    if (e.kind === "tool") { name.appendChild(el("br")); name.appendChild(el("small", {}, e.id)); }
    tr.appendChild(name);
    tr.appendChild(el("td", {}, e.status));
    tr.appendChild(el("td", {}, String(e.attempt)));
    tr.appendChild(el("td", { "class": "num" }, e.latency));
    tr.appendChild(el("td", { "class": "num" }, e.tokens === null ? "\u2013" : String(e.tokens)));
    var last = el("td");
    if (e.error) { last.appendChild(el("span", { "class": "error-text" }, e.error)); } else { last.textContent = e.summary; }
    tr.appendChild(last);
    return tr;
  }

  // add the rows the table does not have yet, each at its place in the server's order
  function addRows(tbody, events) {
    var known = {};
    tbody.querySelectorAll("tr[data-key]").forEach(function (tr) { known[tr.dataset.key] = tr; });
    var added = 0;
    var next = null;
    for (var i = events.length - 1; i >= 0; i--) {
      var e = events[i];
      if (known[e.key]) { next = known[e.key]; continue; }
      var tr = timelineRow(e);
      tbody.insertBefore(tr, next);
      next = tr;
      added++;
    }
    if (events.length) { tbody.querySelectorAll("tr.empty").forEach(function (tr) { tr.remove(); }); }
    return added;
  }

  function watchAnalysis(section) {
    var url = section.dataset.live;
    var status = section.querySelector("#status");
    var list = section.querySelector("#stepper");
    var note = section.querySelector("#progress-note");
    var pass = section.querySelector("#pass");
    var tbody = document.getElementById("timeline-rows");
    function tick() {
      var count = tbody ? tbody.querySelectorAll("tr[data-key]").length : 0;
      getJSON(url + "?n=" + count).then(function (a) {
        clockSkew = Date.parse(a.now) - Date.now();
        if (status.textContent !== a.status) {
          status.textContent = a.status;
          status.className = "status status-" + a.status;
        }
        renderSteps(list, a.steps);
        if (note) { note.textContent = a.progress || ""; }
        if (pass) { pass.textContent = a.passes > 1 ? "\u00b7 pass " + a.pass + " of at most " + a.passes : ""; }
        if (tbody && a.events) { addRows(tbody, a.events); }
        tickClocks();
        if (a.finished) {
          swapMain("The analysis finished: " + a.status + ".");
          return;
        }
        window.setTimeout(tick, 1500);
      }).catch(function () { window.setTimeout(tick, 5000); });
    }
    window.setTimeout(tick, 800);
  }

  // --- a watchlist run's page -------------------------------------------------------------
  function tickerRow(t) {
    var tr = el("tr", { "data-symbol": t.symbol, "class": "ticker-" + t.state });
    var sym = el("td");
    if (t.url) { sym.appendChild(el("a", { href: t.url }, t.symbol)); } else { sym.textContent = t.symbol; }
    tr.appendChild(sym);
    var cell = el("td", { "class": "ticker-progress" });
    var bar = el("progress", { max: String(t.steps), value: String(t.step), "aria-label": t.symbol + " progress" });
    cell.appendChild(bar);
    cell.appendChild(el("span", {}, " " + t.label));
    tr.appendChild(cell);
    tr.appendChild(el("td", {}, t.signal || (t.error ? "" : "\u2013")));
    var err = el("td");
    if (t.error) { err.appendChild(el("span", { "class": "error-text" }, t.error)); }
    tr.appendChild(err);
    return tr;
  }

  function renderCounts(box, c) {
    if (!box) { return; }
    var finished = c.done + c.failed;
    box.textContent = finished + " of " + (c.total - c.refused) + " analyses finished (" + c.done + " done, " +
      c.failed + " failed), " + c.running + " running, " + c.queued + " queued" +
      (c.refused ? ", " + c.refused + " not started" : "") + ".";
    var meter = document.getElementById("run-meter");
    if (meter) { meter.max = Math.max(1, c.total - c.refused); meter.value = finished; }
  }

  function watchRun(section) {
    var url = section.dataset.live;
    var tbody = section.querySelector("#ticker-rows");
    var counts = section.querySelector("#run-counts");
    function tick() {
      getJSON(url).then(function (r) {
        renderCounts(counts, r.counts);
        if (tbody) { tbody.replaceChildren.apply(tbody, r.tickers.map(tickerRow)); }
        if (r.finished) {
          swapMain("The run finished: its digest is below.");
          return;
        }
        window.setTimeout(tick, 2000);
      }).catch(function () { window.setTimeout(tick, 5000); });
    }
    window.setTimeout(tick, 1000);
  }

  // --- a backtest's page ------------------------------------------------------------------
  function watchBacktest(section) {
    var url = section.dataset.live;
    var counts = section.querySelector("#backtest-counts");
    var meter = section.querySelector("#backtest-meter");
    function tick() {
      getJSON(url).then(function (b) {
        var p = b.progress;
        if (meter) { meter.max = Math.max(1, p.total - p.refused); meter.value = p.done + p.failed + p.cancelled; }
        if (counts) {
          counts.textContent = (p.done + p.failed + p.cancelled) + " of " + (p.total - p.refused) +
            " analyses finished (" + p.done + " done, " + p.failed + " failed" +
            (p.cancelled ? ", " + p.cancelled + " cancelled" : "") + "), " + p.running + " running, " +
            p.queued + " queued" + (p.refused ? "; " + p.refused + " grid points refused" : "") + ".";
        }
        if (b.finished) {
          swapMain("The backtest finished.");
          return;
        }
        window.setTimeout(tick, 2000);
      }).catch(function () { window.setTimeout(tick, 5000); });
    }
    window.setTimeout(tick, 1000);
  }

  // --- forms that take seconds ------------------------------------------------------------
  // [data-busy="text"] on a form: on submit its button is disabled and the text announced, so a
  // second click does not send it twice and the wait is said.
  function busyForm(form) {
    form.addEventListener("submit", function () {
      var button = form.querySelector("button[type=submit]");
      if (button) { window.setTimeout(function () { button.disabled = true; }, 0); }
      var note = form.querySelector(".busy");
      if (note) { note.textContent = form.dataset.busy; }
      announce(form.dataset.busy);
    });
  }

  var WATCHERS = { analysis: watchAnalysis, run: watchRun, backtest: watchBacktest };

  function init(root) {
    root.querySelectorAll("[data-poll]").forEach(watchStatus);
    root.querySelectorAll("[data-live]").forEach(function (section) {
      var watcher = WATCHERS[section.dataset.kind];
      if (watcher) { watcher(section); }
    });
    root.querySelectorAll("form[data-busy]").forEach(busyForm);
  }

  init(document);
  window.setInterval(tickClocks, 1000);
})();
