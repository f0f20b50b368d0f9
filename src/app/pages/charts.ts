/**
 * The dashboard's charts, drawn as SVG by the page's own script from `GET /v1/history`: the
 * backlog by state, messages published and acked per minute, and the oldest message's age. No
 * library: a polyline per series on a shared scale. Each line carries the values it draws
 * (`data-values`) and each chart its scale (`data-max`), for whoever reads the page (the test does).
 *
 * This is script text, placed in the dashboard's script (src/app/pages/dashboard.ts).
 */
export const CHARTS_JS = `
  const SVG = "http://www.w3.org/2000/svg";
  const CHART = { width: 360, height: 120 };
  const BACKLOG = [
    ["ready", "ready"],
    ["waiting", "waiting"],
    ["in_flight", "in flight"],
    ["parked", "parked"],
    ["delayed", "delayed"],
    ["dead_letters", "dead letters"],
  ];

  /** The smallest of 1, 2, 5 × 10^k at or above v (at least 1): a scale that reads well. */
  function niceMax(v) {
    if (!(v > 1)) return 1;
    const p = Math.pow(10, Math.floor(Math.log10(v)));
    for (const m of [1, 2, 5, 10]) if (m * p >= v) return m * p;
    return 10 * p;
  }

  /** Per minute between consecutive samples, from a running total: one value fewer than samples. */
  function perMinute(samples, key) {
    const out = [];
    for (let i = 1; i < samples.length; i++) {
      const dt = samples[i].at - samples[i - 1].at;
      out.push(dt > 0 ? Math.max(0, ((samples[i][key] - samples[i - 1][key]) / dt) * 60) : 0);
    }
    return out;
  }

  function el(name, attrs) {
    const node = document.createElementNS(SVG, name);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
    return node;
  }

  const round = (v) => Math.round(v * 100) / 100;

  /**
   * Draws \`series\` ([{key, label, values}]) at times \`at\` (epoch seconds) into the chart box \`box\`:
   * the SVG, and a legend with each series' latest value.
   */
  function drawChart(box, at, series, unit) {
    const { width: W, height: H } = CHART;
    const max = niceMax(Math.max(0, ...series.flatMap((s) => s.values)));
    const from = at[0];
    const span = at.length > 1 ? at[at.length - 1] - from : 0;
    const x = (t) => (span > 0 ? ((t - from) / span) * W : W / 2);
    const y = (v) => H - (v / max) * H;
    const svg = el("svg", { viewBox: "0 0 " + W + " " + H, role: "img", "data-max": max, "data-from": from,
      "data-to": from + span, preserveAspectRatio: "none" });
    svg.setAttribute("aria-label", box.dataset.title + ", up to " + max + unit);
    for (const f of [0.5, 1]) svg.appendChild(el("line", { x1: 0, x2: W, y1: y(max * f), y2: y(max * f), class: "grid" }));
    for (const s of series) {
      const points = s.values.map((v, i) => round(x(at[i])) + "," + round(y(v))).join(" ");
      svg.appendChild(el("polyline", { points, class: "line series-" + s.key, "data-series": s.key,
        "data-values": s.values.map(round).join(",") }));
    }
    const legend = document.createElement("div");
    legend.className = "legend";
    for (const s of series) {
      const item = document.createElement("span");
      item.className = "key series-" + s.key;
      const last = s.values.length ? round(s.values[s.values.length - 1]) : 0;
      item.textContent = s.label + " " + last + unit;
      legend.appendChild(item);
    }
    const scale = document.createElement("div");
    scale.className = "scale";
    scale.textContent = "0 – " + max + unit + (span > 0 ? ", over the last " + duration(span) : "");
    box.querySelector(".plot").replaceChildren(svg);
    box.querySelector(".legend-box").replaceChildren(legend, scale);
  }

  function renderCharts(history) {
    const s = history.samples;
    $("charts-empty").hidden = s.length > 0;
    $("charts").hidden = s.length === 0;
    if (s.length === 0) return;
    const at = s.map((x) => x.at);
    drawChart($("chart-backlog"), at, BACKLOG.map(([key, label]) => ({ key, label, values: s.map((x) => x[key]) })), "");
    const rateAt = at.slice(1);
    drawChart($("chart-throughput"), rateAt.length ? rateAt : at, [
      { key: "published", label: "published", values: rateAt.length ? perMinute(s, "published") : [0] },
      { key: "acked", label: "acked", values: rateAt.length ? perMinute(s, "acked") : [0] },
    ], "/min");
    drawChart($("chart-age"), at, [{ key: "oldest_age", label: "oldest", values: s.map((x) => x.oldest_age || 0) }], " s");
  }
`;
