// finagent console: the interactive price chart of an analysis page, drawn with TradingView's
// Lightweight Charts (vendor/, Apache-2.0) from the JSON of [data-chart="URL"] (chart.json):
// daily candles and volume of the bars the analysis cited, its support and resistance levels
// or zones, Fibonacci levels, trendlines, the stop, an option plan's strike and breakeven, and
// when the data has them forecast ranges (bands) and earnings dates (marks). Hover or the arrow
// keys show a day's open, high, low, close and volume; the legend switches each layer on and
// off. Without scripts the page shows the same chart as a PNG (<noscript>).
(function () {
  "use strict";

  // colours with at least 4.5:1 contrast on white (the labels are text)
  var LAYERS = [
    { key: "support", label: "Support", color: "#146c2e", style: "solid" },
    { key: "resistance", label: "Resistance", color: "#a4141c", style: "solid" },
    { key: "fib", label: "Fibonacci", color: "#0b4f9c", style: "dashed" },
    { key: "trend", label: "Trendlines", color: "#b35900", style: "solid" },
    { key: "stop", label: "Stop", color: "#8a4b00", style: "dotted" },
    { key: "mark", label: "Plan (strike, breakeven)", color: "#6a1b9a", style: "solid" },
    { key: "band", label: "Forecast ranges", color: "#5b3e99", style: "dashed" },
    { key: "earnings", label: "Earnings", color: "#6a1b9a", style: "marker" }
  ];
  var NARROW = 600; // px: below it the Fibonacci levels start hidden (labels would overlap)

  function money(value) {
    return value === null || value === undefined ? "\u2013" :
      value.toLocaleString("en-US", { minimumFractionDigits: 2, maximumFractionDigits: 2 });
  }

  function tooltipText(bar) {
    if (!bar) { return ""; }
    return bar.time + "  O " + money(bar.open) + "  H " + money(bar.high) + "  L " + money(bar.low) +
      "  C " + money(bar.close) + (bar.volume !== null && bar.volume !== undefined ? "  Vol " +
      bar.volume.toLocaleString("en-US") : "");
  }

  function firstOnOrAfter(times, day) {
    for (var i = 0; i < times.length; i++) { if (times[i] >= day) { return times[i]; } }
    return null;
  }

  function draw(box, data) {
    var LC = window.LightweightCharts;
    var bars = data.bars || [];
    if (!bars.length) { throw new Error("no bars"); }
    box.hidden = false;
    var lineStyle = { solid: LC.LineStyle.Solid, dashed: LC.LineStyle.Dashed, dotted: LC.LineStyle.Dotted };
    var chart = LC.createChart(box, {
      autoSize: true,
      layout: { background: { color: "#ffffff" }, textColor: "#1a1a1a", fontSize: 12 },
      grid: { vertLines: { color: "#eeeeee" }, horzLines: { color: "#eeeeee" } },
      rightPriceScale: { borderColor: "#c8c8c8" },
      timeScale: { borderColor: "#c8c8c8" },
      crosshair: { mode: LC.CrosshairMode.Normal },
      localization: { priceFormatter: money }
    });
    var candles = chart.addSeries(LC.CandlestickSeries, {
      upColor: "#146c2e", downColor: "#a4141c", wickUpColor: "#146c2e", wickDownColor: "#a4141c",
      borderVisible: false, priceLineVisible: false
    });
    candles.setData(bars.map(function (b) {
      return { time: b.time, open: b.open, high: b.high, low: b.low, close: b.close };
    }));
    var volume = chart.addSeries(LC.HistogramSeries, {
      priceScaleId: "volume", priceFormat: { type: "volume" }, color: "rgba(74, 74, 74, 0.3)",
      lastValueVisible: false, priceLineVisible: false
    });
    chart.priceScale("volume").applyOptions({ scaleMargins: { top: 0.85, bottom: 0 } });
    volume.setData(bars.filter(function (b) { return b.volume !== null; })
      .map(function (b) { return { time: b.time, value: b.volume }; }));

    var byKey = {};
    LAYERS.forEach(function (layer) { byKey[layer.key] = layer; });
    // each layer: a function that draws it and returns a function that removes it
    var painters = {};
    function priceLines(kind, items) {
      var layer = byKey[kind];
      return function () {
        var lines = items.map(function (item) {
          return candles.createPriceLine({
            price: item.price, color: layer.color, lineWidth: kind === "stop" || kind === "mark" ? 2 : 1,
            lineStyle: lineStyle[layer.style], axisLabelVisible: true, title: item.label
          });
        });
        return function () { lines.forEach(function (line) { candles.removePriceLine(line); }); };
      };
    }
    ["support", "resistance", "fib", "stop", "mark"].forEach(function (kind) {
      var items = (data.levels || []).filter(function (l) { return l.kind === kind; });
      (data.zones || []).filter(function (z) { return z.kind === kind; }).forEach(function (z) {
        // one title per zone (on its far edge from the price), both edges priced on the axis
        var name = kind === "support" ? "Support zone" : "Resistance zone";
        var titled = kind === "support" ? z.low : z.high;
        items.push({ price: titled, label: name }, { price: titled === z.low ? z.high : z.low, label: "" });
      });
      if (items.length) { painters[kind] = priceLines(kind, items); }
    });
    if ((data.bands || []).length) {
      var bandItems = [];
      data.bands.forEach(function (b) {
        bandItems.push({ price: b.low, label: b.label + " low" }, { price: b.high, label: b.label + " high" });
      });
      painters.band = priceLines("band", bandItems);
    }
    if ((data.trendlines || []).length) {
      painters.trend = function () {
        var series = data.trendlines.map(function (t) {
          var line = chart.addSeries(LC.LineSeries, {
            color: byKey.trend.color, lineWidth: 2, lastValueVisible: false, priceLineVisible: false,
            crosshairMarkerVisible: false, title: t.type === "support" ? "Support trend" : "Resistance trend"
          });
          line.setData([{ time: t.start.date, value: t.start.price }, { time: t.end.date, value: t.end.price }]);
          return line;
        });
        return function () { series.forEach(function (s) { chart.removeSeries(s); }); };
      };
    }
    var times = bars.map(function (b) { return b.time; });
    var earnings = (data.earnings && data.earnings.marks) || [];
    var markers = [];
    earnings.forEach(function (m) {
      var day = firstOnOrAfter(times, m.date);  // a report before the open falls on that session
      if (day) { markers.push({ time: day, position: "belowBar", color: byKey.earnings.color, shape: "circle", text: "E" }); }
    });
    if (data.window_start) {
      var start = firstOnOrAfter(times, data.window_start);
      if (start) { markers.push({ time: start, position: "aboveBar", color: "#4a4a4a", shape: "arrowDown", text: "levels' window" }); }
    }
    markers.sort(function (a, b) { return a.time < b.time ? -1 : a.time > b.time ? 1 : 0; });
    var markerApi = LC.createSeriesMarkers(candles, []);
    var windowMarkers = markers.filter(function (m) { return m.text !== "E"; });
    if (earnings.length) {
      painters.earnings = function () {
        markerApi.setMarkers(markers);
        return function () { markerApi.setMarkers(windowMarkers); };
      };
    }
    markerApi.setMarkers(windowMarkers);

    // the legend: one switch per layer present, with the values it draws
    var legend = box.parentNode.querySelector(".chart-legend");
    var erasers = {};
    function setLayer(kind, on) {
      if (erasers[kind]) { erasers[kind](); delete erasers[kind]; }
      if (on && painters[kind]) { erasers[kind] = painters[kind](); }
    }
    if (legend) {
      legend.replaceChildren();
      var fieldset = document.createElement("fieldset");
      var caption = document.createElement("legend");
      caption.textContent = "Layers (USD, adjusted to the prices traded on " + data.as_of + ")";
      fieldset.appendChild(caption);
      LAYERS.forEach(function (layer) {
        if (!painters[layer.key]) { return; }
        var on = !(layer.key === "fib" && box.clientWidth < NARROW);
        var id = "layer-" + layer.key;
        var wrap = document.createElement("div");
        wrap.className = "layer";
        var input = document.createElement("input");
        input.type = "checkbox";
        input.id = id;
        input.checked = on;
        input.addEventListener("change", function () { setLayer(layer.key, input.checked); });
        var label = document.createElement("label");
        label.htmlFor = id;
        var swatch = document.createElement("span");
        swatch.className = "swatch swatch-" + layer.style;
        swatch.style.borderColor = layer.color;
        label.appendChild(swatch);
        label.appendChild(document.createTextNode(layer.label + ": " + describe(layer.key, data)));
        wrap.appendChild(input);
        wrap.appendChild(label);
        fieldset.appendChild(wrap);
        setLayer(layer.key, on);
      });
      if (data.option) {
        var plan = document.createElement("p");
        plan.className = "meta";
        plan.textContent = "Option expiry " + data.option.expiry + (data.option.events.length ? "; days to watch: " +
          data.option.events.map(function (e) { return e.label + " " + e.date; }).join(", ") : "") + ".";
        fieldset.appendChild(plan);
      }
      if (data.earnings && data.earnings.next) {
        var next = document.createElement("p");
        next.className = "meta";
        next.textContent = "Next earnings: " + data.earnings.next.date + " (after the last bar).";
        fieldset.appendChild(next);
      }
      legend.appendChild(fieldset);
      legend.hidden = false;
    } else {
      Object.keys(painters).forEach(function (kind) { setLayer(kind, true); });
    }

    // the crosshair's day, in words (hover, touch or the arrow keys)
    var tip = box.querySelector(".chart-tooltip");
    var byTime = {};
    bars.forEach(function (b, i) { byTime[b.time] = i; });
    var index = bars.length - 1;
    function show(i) {
      if (i === null || i === undefined || !bars[i]) { return; }
      index = i;
      tip.textContent = tooltipText(bars[i]);
    }
    show(index);
    chart.subscribeCrosshairMove(function (param) {
      if (!param || param.time === undefined) { return; }
      var key = typeof param.time === "string" ? param.time :
        param.time.year + "-" + String(param.time.month).padStart(2, "0") + "-" + String(param.time.day).padStart(2, "0");
      if (byTime[key] !== undefined) { show(byTime[key]); }
    });
    box.addEventListener("keydown", function (event) {
      var moves = { ArrowLeft: -1, ArrowRight: 1, Home: -bars.length, End: bars.length };
      if (!(event.key in moves)) { return; }
      event.preventDefault();
      var i = Math.max(0, Math.min(bars.length - 1, index + moves[event.key]));
      show(i);
      chart.setCrosshairPosition(bars[i].close, bars[i].time, candles);
      var range = chart.timeScale().getVisibleLogicalRange();
      if (range && (i < range.from || i > range.to)) {
        var width = range.to - range.from;
        chart.timeScale().setVisibleLogicalRange({ from: i - width / 2, to: i + width / 2 });
      }
    });
    box.addEventListener("blur", function () { chart.clearCrosshairPosition(); });
    // about six months in view at first (all of it is a zoom or a drag away)
    var shown = box.clientWidth < NARROW ? 70 : 130;
    chart.timeScale().setVisibleLogicalRange({ from: Math.max(0, bars.length - shown), to: bars.length + 3 });
    box.dataset.ready = "drawn";
  }

  function describe(kind, data) {
    if (kind === "earnings") {
      return data.earnings.marks.map(function (m) { return m.date; }).join(", ") + " (marked E)";
    }
    if (kind === "trend") {
      return data.trendlines.map(function (t) { return t.type + " " + money(t.start.price) + " \u2192 " + money(t.end.price); }).join("; ");
    }
    if (kind === "band") {
      return data.bands.map(function (b) { return b.label + " " + money(b.low) + "\u2013" + money(b.high); }).join("; ");
    }
    var items = (data.levels || []).filter(function (l) { return l.kind === kind; })
      .map(function (l) { return (kind === "fib" || kind === "mark" ? l.label + " " : "") + money(l.price); });
    (data.zones || []).filter(function (z) { return z.kind === kind; })
      .forEach(function (z) { items.push(money(z.low) + "\u2013" + money(z.high)); });
    return items.join(", ");
  }

  function build(box) {
    if (box.dataset.ready) { return; }
    box.dataset.ready = "loading";
    var failed = function (why) {
      box.dataset.ready = "failed";
      var note = document.createElement("p");
      note.className = "error";
      note.setAttribute("role", "alert");
      note.textContent = "The interactive chart could not be drawn (" + why + "); the PNG link below still works.";
      box.parentNode.insertBefore(note, box);
    };
    if (!window.LightweightCharts) { failed("its script did not load"); return; }
    fetch(box.dataset.chart, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (r) { return r.ok ? r.json() : Promise.reject(new Error("HTTP " + r.status)); })
      .then(function (data) { draw(box, data); })
      .catch(function (err) { failed(err.message); });
  }

  function init() { document.querySelectorAll("[data-chart]").forEach(build); }

  document.addEventListener("console:updated", init);
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", init);
  } else {
    init();
  }
})();
