// finagent console: live status. An element with data-poll="URL" shows the analysis's status,
// fetched from URL (JSON of GET /console/analyses/{id}/status.json) every 2 s until it is one
// of data-terminal; with data-reload the page reloads then (to show the report).
(function () {
  "use strict";
  function watch(el) {
    var terminal = (el.dataset.terminal || "done,failed").split(",");
    function tick() {
      fetch(el.dataset.poll, { credentials: "same-origin", headers: { Accept: "application/json" } })
        .then(function (r) { return r.ok ? r.json() : null; })
        .then(function (a) {
          if (!a) { return; }
          var text = a.status + (a.progress && terminal.indexOf(a.status) < 0 ? " \u2014 " + a.progress : "");
          if (el.textContent !== text) { el.textContent = text; }
          el.className = "status status-" + a.status;
          if (terminal.indexOf(a.status) >= 0) {
            if (el.hasAttribute("data-reload")) { window.location.reload(); }
            return;
          }
          window.setTimeout(tick, 2000);
        })
        .catch(function () { window.setTimeout(tick, 5000); });
    }
    window.setTimeout(tick, 1000);
  }
  document.querySelectorAll("[data-poll]").forEach(watch);
})();
