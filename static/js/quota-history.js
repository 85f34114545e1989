// The quota history chart: draws the page's JSON (deserved, in use, borrowed per step) with uPlot, kept in
// static/vendor/uplot/ and served by the portal (no CDN; the Content-Security-Policy allows only our own scripts).
// Without JavaScript the page's table has the same numbers.
(function () {
  function draw() {
    const source = document.getElementById("quota-history-data");
    const target = document.getElementById("quota-history-chart");
    if (!source || !target || typeof window.uPlot !== "function") return;
    const data = JSON.parse(source.textContent);
    const width = Math.max(200, target.clientWidth || 600);
    const options = {
      title: data.title,
      width: width,
      height: 320,
      scales: { x: { time: true }, y: { range: (u, min, max) => [0, Math.max(1, max * 1.1)] } },
      axes: [{}, { label: "GPU units" }],
      series: [
        {},
        { label: "Deserved", stroke: "#2f6f3e", width: 2, dash: [6, 4], paths: window.uPlot.paths.stepped({ align: 1 }) },
        { label: "In use", stroke: "#2357a6", width: 2, fill: "rgba(35, 87, 166, 0.12)" },
        { label: "Borrowed", stroke: "#b4561b", width: 2, fill: "rgba(180, 86, 27, 0.18)" },
      ],
    };
    target.replaceChildren();
    const chart = new window.uPlot(options, [data.t, data.deserved, data.used, data.borrowed], target);
    target.dataset.drawn = String(data.t.length);
    window.addEventListener("resize", () => chart.setSize({ width: Math.max(200, target.clientWidth), height: 320 }));
  }
  document.addEventListener("DOMContentLoaded", draw);
})();
