// The use-over-time charts: one uPlot chart per node pool (allocated, within deserved, deserved and, with a
// Prometheus, busy cards per step), drawn from the page's JSON with the uPlot kept in static/vendor/uplot/ (no CDN).
// Without JavaScript the CSV link has the same numbers.
(function () {
  function draw() {
    const source = document.getElementById("over-time-data");
    if (!source || typeof window.uPlot !== "function") return;
    const data = JSON.parse(source.textContent);
    data.pools.forEach((pool, index) => {
      const target = document.querySelector(`[data-over-time-chart="${index}"]`);
      if (!target) return;
      const series = [
        {},
        { label: "Allocated", stroke: "#2357a6", width: 2, fill: "rgba(35, 87, 166, 0.12)" },
        { label: "Within deserved", stroke: "#4f86c6", width: 1 },
        { label: "Deserved", stroke: "#2f6f3e", width: 2, dash: [6, 4], paths: window.uPlot.paths.stepped({ align: 1 }) },
      ];
      const values = [data.t, pool.allocated, pool.within, pool.deserved];
      if (pool.busy) {
        series.push({ label: "Busy", stroke: "#b4561b", width: 2 });
        values.push(pool.busy);
      }
      const width = Math.max(200, target.clientWidth || 600);
      const options = {
        title: pool.title,
        width: width,
        height: 280,
        scales: { x: { time: true }, y: { range: (u, min, max) => [0, Math.max(1, max * 1.1)] } },
        axes: [{}, { label: "cards" }],
        series: series,
      };
      target.replaceChildren();
      const chart = new window.uPlot(options, values, target);
      target.dataset.drawn = String(data.t.length);
      window.addEventListener("resize", () => chart.setSize({ width: Math.max(200, target.clientWidth), height: 280 }));
    });
  }
  document.addEventListener("DOMContentLoaded", draw);
})();
