"""Every benchmark in bench/ runs, as bench/README.md says, at a smoke size of seconds: a bench that no longer runs
fails CI instead of rotting until someone needs its figures."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# The benches whose figures are in bench/README.md's results table (bench/report.py).
RECORDS = {path.name for path in (ROOT / "bench").glob("*.py")} - {"report.py"}
SMOKE = {
    "forecast_accuracy.py": ["--workloads", "20"],
    "forecast_speed.py": ["--pending", "20", "--runs", "1"],
    "kubesim_admission.py": ["--cqs", "4", "--cohorts", "2", "--workloads", "40"],
    "memory.py": ["--settle", "0", "--idle-seconds", "2", "--submissions", "4", "--clients", "2", "--soak-minutes",
                  "0.1", "--soak-jobs", "3", "--soak-churn", "2"],
    "live_pages.py": ["--workloads", "60", "--projects", "4", "--requests", "2", "--changes", "10", "--rate", "10"],
    "web_cost.py": ["--workloads", "60", "--projects", "4", "--requests", "3"],
    "outside_sync.py": ["--workloads", "20", "--projects", "4", "--changes", "10", "--rate", "10"],
    "kubesim_creates.py": ["--workloads", "40", "--projects", "4", "--changes", "10", "--rate", "10"],
    "kubesim_preemption.py": ["--cqs", "4", "--admitted", "40"],
    "submit_load.py": ["--submissions", "10", "--clients", "2", "--pollers", "2", "--think", "0.1"],
    "submit_checks.py": ["--submits", "10", "--rounds", "1", "--policies", "5", "--budgets", "10"],
    "follow_load.py": ["--followers", "2", "--seconds", "4", "--baseline", "2"],
    "usage_report.py": ["--intervals", "400", "--projects", "4", "--runs", "1"],
    "utilisation_report.py": ["--intervals", "400", "--projects", "4", "--runs", "1"],
    "over_time_report.py": ["--intervals", "400", "--projects", "4", "--runs", "1"],
    "report.py": ["--print"],
}

pytestmark = pytest.mark.slow


def test_every_bench_has_a_smoke_run():
    assert set(SMOKE) == {path.name for path in (ROOT / "bench").glob("*.py")}


@pytest.fixture(scope="module")
def bench_database_url():
    """The benches make their databases beside DATABASE_URL's (`<name>_bench`, `<name>_bench_load`, ...) and keep
    them between runs; a smoke run gets a name of its own, so a database another checkout migrated further (or
    differently) can never fail it, and drops what the benches made."""
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith(("postgres://", "postgresql://")):
        yield url
        return
    base, name = url.rsplit("/", 1)
    own = f"{name.split('?')[0]}_smoke{os.getpid()}"
    yield f"{base}/{own}"
    import psycopg

    with psycopg.connect(f"{base}/postgres", autocommit=True) as connection:
        made = connection.execute("SELECT datname FROM pg_database WHERE datname LIKE %s", [f"{own}%"]).fetchall()
        for (database,) in made:
            connection.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')


@pytest.mark.parametrize("bench", sorted(SMOKE))
def test_the_bench_runs_at_a_smoke_size(bench, tmp_path, bench_database_url):
    """Its figures go to a results folder of its own (never the committed bench/results/), in the format the
    README's table is rendered from."""
    results = tmp_path / "results"
    if bench == "report.py":  # renders the committed results
        results = ROOT / "bench" / "results"
    result = subprocess.run([sys.executable, str(ROOT / "bench" / bench), *SMOKE[bench]], cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT), "BENCH_RESULTS_DIR": str(results),
                                 "DATABASE_URL": bench_database_url,
                                 # A bench's collectstatic never rewrites the folder the tests' pages read meanwhile.
                                 "STATIC_ROOT": str(tmp_path / "static")},
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert result.stdout.strip()
    if bench in RECORDS:  # what it recorded renders (bench/report.py checks each file's format first)
        rendered = subprocess.run([sys.executable, str(ROOT / "bench" / "report.py"), "--print"], cwd=ROOT,
                                  env={**os.environ, "BENCH_RESULTS_DIR": str(results)}, capture_output=True,
                                  text=True, timeout=60)
        assert rendered.returncode == 0, rendered.stdout + rendered.stderr
        assert f"| `{bench}` |" in rendered.stdout
