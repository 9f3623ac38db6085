// Draws the charts of a millimcp lab report into inline SVG, from the JSON block
// #report-data written by millimcp/lab/report.py. No libraries, no network.
// When done, <body data-charts-drawn="N"> counts the charts drawn without error, and each
// <svg data-marks="M"> counts the data marks (points, bars, segments) it holds.
(function () {
  "use strict";
  const NS = "http://www.w3.org/2000/svg";
  const WIDTH = 560;
  const HEIGHT = 300;
  const MARGIN = { top: 14, right: 18, bottom: 46, left: 62 };

  function node(name, attrs, parent, text) {
    const element = document.createElementNS(NS, name);
    for (const [key, value] of Object.entries(attrs)) {
      element.setAttribute(key, String(value));
    }
    if (text !== undefined) element.textContent = text;
    if (parent) parent.appendChild(element);
    return element;
  }

  function fmt(value) {
    const size = Math.abs(value);
    if (size === 0) return "0";
    if (size >= 10000) return (value / 1000).toFixed(0) + "k";
    if (size >= 1000) return (value / 1000).toFixed(1).replace(/\.0$/, "") + "k";
    if (size >= 10) return value.toFixed(0);
    if (size >= 1) return value.toFixed(1).replace(/\.0$/, "");
    return String(parseFloat(value.toPrecision(2)));
  }

  function linearTicks(low, high, count) {
    const span = high - low;
    let step = Math.pow(10, Math.floor(Math.log10(span / count)));
    const ratio = span / count / step;
    if (ratio >= 7.5) step *= 10;
    else if (ratio >= 3.5) step *= 5;
    else if (ratio >= 1.5) step *= 2;
    const ticks = [];
    for (let tick = Math.ceil(low / step) * step; tick <= high + step * 1e-9; tick += step) {
      const clean = parseFloat(tick.toPrecision(12));
      ticks.push([clean, fmt(clean)]);
    }
    return ticks;
  }

  function logTicks(low, high) {
    const ticks = [];
    const mantissas = Math.log10(high / low) > 1.5 ? [1, 2, 5] : [1, 1.5, 2, 3, 5, 7];
    for (let exp = Math.floor(Math.log10(low)); exp <= Math.ceil(Math.log10(high)); exp++) {
      for (const mantissa of mantissas) {
        const value = mantissa * Math.pow(10, exp);
        if (value >= low && value <= high) ticks.push([value, fmt(value)]);
      }
    }
    return ticks;
  }

  function niceCeil(value) {
    if (value <= 0) return 1;
    const unit = Math.pow(10, Math.floor(Math.log10(value)));
    for (const step of [1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10]) {
      if (step * unit >= value) return step * unit;
    }
    return 10 * unit;
  }

  function range(values, axis, padTop) {
    let low = Infinity;
    let high = -Infinity;
    for (const value of values) {
      if (value < low) low = value;
      if (value > high) high = value;
    }
    if (axis.min !== undefined) low = axis.min;
    else if (axis.scale === "log") low = low * 0.85;
    if (axis.max !== undefined) high = axis.max;
    else if (padTop) high = axis.scale === "log" ? high * 1.2 : niceCeil(high * 1.05);
    if (!(high > low)) high = low + (low === 0 ? 1 : Math.abs(low) * 0.1);
    return [low, high];
  }

  function scale(axis, low, high, from, to) {
    if (axis.scale === "log") {
      const a = Math.log(low);
      const b = Math.log(high);
      return (value) => from + ((Math.log(value) - a) / (b - a)) * (to - from);
    }
    return (value) => from + ((value - low) / (high - low)) * (to - from);
  }

  function frame(figure, spec, xRange, yRange, height, margin) {
    const svg = node("svg", {
      viewBox: `0 0 ${WIDTH} ${height}`,
      class: "plot",
      role: "img",
      "aria-label": spec.title,
    });
    figure.appendChild(svg);
    const x = scale(spec.x, xRange[0], xRange[1], margin.left, WIDTH - margin.right);
    const bottom = height - margin.bottom;
    const axes = node("g", { class: "axes" }, svg);
    const xTicks =
      spec.x.ticks ||
      (spec.x.scale === "log" ? logTicks(xRange[0], xRange[1]) : linearTicks(xRange[0], xRange[1], 6));
    for (const [value, label] of xTicks) {
      const at = x(value).toFixed(1);
      node("line", { x1: at, x2: at, y1: margin.top, y2: bottom, class: "grid" }, axes);
      node("text", { x: at, y: bottom + 16, "text-anchor": "middle" }, axes, label);
    }
    let y = null;
    if (yRange) {
      y = scale(spec.y, yRange[0], yRange[1], bottom, margin.top);
      const yTicks =
        spec.y.scale === "log" ? logTicks(yRange[0], yRange[1]) : linearTicks(yRange[0], yRange[1], 5);
      for (const [value, label] of yTicks) {
        const at = y(value).toFixed(1);
        node("line", { x1: margin.left, x2: WIDTH - margin.right, y1: at, y2: at, class: "grid" }, axes);
        node("text", { x: margin.left - 6, y: Number(at) + 4, "text-anchor": "end" }, axes, label);
      }
      const middle = (margin.top + bottom) / 2;
      node("text", { x: 14, y: middle, transform: `rotate(-90 14 ${middle})`, "text-anchor": "middle", class: "label" }, axes, spec.y.label);
    }
    node("line", { x1: margin.left, x2: WIDTH - margin.right, y1: bottom, y2: bottom, class: "base" }, axes);
    node("text", { x: (margin.left + WIDTH - margin.right) / 2, y: height - 8, "text-anchor": "middle", class: "label" }, axes, spec.x.label);
    return { svg, x, y };
  }

  function legend(figure, items) {
    const box = document.createElement("div");
    box.className = "legend";
    for (const item of items) {
      const entry = document.createElement("span");
      const swatch = document.createElement("i");
      swatch.style.background = item.color;
      if (item.dash) swatch.className = "dashed";
      entry.appendChild(swatch);
      entry.appendChild(document.createTextNode(item.name));
      box.appendChild(entry);
    }
    figure.appendChild(box);
  }

  function drawLines(figure, spec) {
    const xs = [];
    const ys = [];
    for (const series of spec.series) {
      for (const point of series.points) {
        xs.push(point[0]);
        ys.push(point[1]);
      }
    }
    const plot = frame(figure, spec, range(xs, spec.x, false), range(ys, spec.y, true), HEIGHT, MARGIN);
    let marks = 0;
    for (const series of spec.series) {
      const path = series.points
        .map((point, index) => `${index ? "L" : "M"}${plot.x(point[0]).toFixed(1)},${plot.y(point[1]).toFixed(1)}`)
        .join("");
      const line = node("path", { d: path, class: "series", stroke: series.color, fill: "none" }, plot.svg);
      if (series.dash) line.setAttribute("stroke-dasharray", series.dash);
      node("title", {}, line, series.name);
      for (const point of series.points) {
        const dot = node("circle", { cx: plot.x(point[0]).toFixed(1), cy: plot.y(point[1]).toFixed(1), r: 2.4, fill: series.color, class: "point" }, plot.svg);
        node("title", {}, dot, `${series.name}: ${point[2] || fmt(point[0])} → ${fmt(point[1])}`);
        marks++;
      }
    }
    plot.svg.setAttribute("data-marks", String(marks));
    legend(figure, spec.series);
  }

  function drawBars(figure, spec) {
    const heights = [];
    for (const series of spec.series) for (const bin of series.bins) heights.push(bin[2]);
    const plot = frame(figure, spec, [spec.x.min, spec.x.max], range(heights, spec.y, true), HEIGHT, MARGIN);
    const opacity = spec.series.length > 1 ? 0.55 : 0.85;
    let marks = 0;
    for (const series of spec.series) {
      for (const [low, high, share, count] of series.bins) {
        const left = plot.x(low);
        const top = plot.y(share);
        const bar = node("rect", {
          x: left.toFixed(1),
          y: top.toFixed(1),
          width: Math.max(plot.x(high) - left - 1, 1).toFixed(1),
          height: Math.max(plot.y(0) - top, 0.5).toFixed(1),
          fill: series.color,
          "fill-opacity": opacity,
          class: "bar",
        }, plot.svg);
        node("title", {}, bar, `${series.name}: ${fmt(low)}–${fmt(high)} ms: ${count} (${share.toFixed(1)}%)`);
        marks++;
      }
    }
    plot.svg.setAttribute("data-marks", String(marks));
    legend(figure, spec.series);
  }

  function drawStacked(figure, spec) {
    const margin = { top: 10, right: 18, bottom: 46, left: 86 };
    const rowHeight = 34;
    const height = margin.top + spec.rows.length * rowHeight + margin.bottom;
    const totals = spec.rows.map((row) => row.segments.reduce((sum, segment) => sum + segment.value, 0));
    const plot = frame(figure, spec, range(totals, spec.x, true), null, height, margin);
    let marks = 0;
    spec.rows.forEach((row, index) => {
      const top = margin.top + index * rowHeight + 5;
      node("text", { x: margin.left - 8, y: top + 16, "text-anchor": "end", class: "label" }, plot.svg, row.name);
      let start = 0;
      for (const segment of row.segments) {
        const left = plot.x(start);
        const width = plot.x(start + segment.value) - left;
        const block = node("rect", { x: left.toFixed(1), y: top, width: Math.max(width, 0).toFixed(1), height: rowHeight - 10, fill: segment.color, class: "segment" }, plot.svg);
        node("title", {}, block, `${row.name} ${segment.name}: ${fmt(segment.value)} ms (${(segment.share * 100).toFixed(0)}%)`);
        if (width > 34) {
          node("text", { x: (left + width / 2).toFixed(1), y: top + 16, "text-anchor": "middle", class: "inside" }, plot.svg, fmt(segment.value));
        }
        start += segment.value;
        marks++;
      }
    });
    plot.svg.setAttribute("data-marks", String(marks));
    legend(figure, spec.legend);
  }

  const painters = { lines: drawLines, bars: drawBars, stacked: drawStacked };
  const data = JSON.parse(document.getElementById("report-data").textContent);
  let drawn = 0;
  for (const spec of data.charts) {
    const figure = document.getElementById(spec.id);
    try {
      painters[spec.kind](figure, spec);
      drawn++;
    } catch (error) {
      const note = document.createElement("p");
      note.className = "chart-error";
      note.textContent = `This chart could not be drawn: ${error}`;
      figure.appendChild(note);
    }
  }
  document.body.setAttribute("data-charts-drawn", String(drawn));
})();
