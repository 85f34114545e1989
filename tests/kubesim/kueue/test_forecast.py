"""Start-time forecasts on plain data."""

from __future__ import annotations

from datetime import timedelta

from kubesim.kueue.scheduler import forecast
from tests.kubesim.kueue.sim import T0, Sim, cluster_queue, local_queue


def test_forecast_fifo_queue():
    sim = Sim()
    sim.cqs.append(cluster_queue("cq", 2))
    sim.lqs.append(local_queue("lq", "cq"))
    for name in ("a", "b", "c", "d", "e"):
        sim.add(name, "lq", 1)
    sim.settle()
    assert sim.running() == {"a", "b"}
    starts = forecast(sim.snapshot(), lambda wl: 100, T0)
    by_name = {k.split("/")[1]: (v - T0).total_seconds() for k, v in starts.items()}
    assert by_name == {"c": 100, "d": 100, "e": 200}


def test_forecast_with_preemption_and_horizon():
    sim = Sim()
    sim.cqs.append(cluster_queue("cq", 1, within="LowerPriority"))
    sim.lqs.append(local_queue("lq", "cq"))
    sim.add("low", "lq", 1, priority=1)
    sim.settle()
    sim.add("high", "lq", 1, priority=10)
    starts = forecast(sim.snapshot(), lambda wl: 50, T0, horizon=timedelta(seconds=60))
    by_name = {k.split("/")[1]: (v - T0).total_seconds() for k, v in starts.items()}
    assert by_name == {"high": 0, "low": 50}
