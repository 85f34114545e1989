"""bench/README.md's results table is what the benches recorded in bench/results/ (bench/report.py renders it), never
typed by hand; a results file of the wrong shape is refused."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REPORT = ROOT / "bench" / "report.py"


def report(*args: str, results: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key != "BENCH_RESULTS_DIR"}
    if results is not None:
        env["BENCH_RESULTS_DIR"] = str(results)
    return subprocess.run([sys.executable, str(REPORT), *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=60)


def test_the_readme_table_is_the_one_the_results_files_give():
    checked = report("--check")
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_every_committed_results_file_has_a_row_per_figure_and_commit():
    files = sorted((ROOT / "bench" / "results").glob("*.json"))
    assert files, "the benches' results are committed in bench/results/"
    rows = report("--print").stdout.splitlines()
    for path in files:
        data = json.loads(path.read_text())
        for run in data["runs"]:
            for figure in run["figures"]:
                assert any(row.startswith(f"| `{data['bench']}` | {figure['name']} |") and row.endswith(
                    f"| {run['commit']} |") for row in rows), (path.name, figure["name"], run["commit"])


def test_a_results_file_of_the_wrong_shape_is_refused(tmp_path):
    run = {"date": "2026-12-07T03:00:00Z", "commit": "abc1234", "load": [1.0, 2.0], "cpus": 2, "arguments": {},
           "figures": [{"name": "a rate", "unit": "1/s", "values": [1.0], "target": ""}]}
    good = {"format": 1, "bench": "x.py", "runs": [run]}
    (tmp_path / "x.json").write_text(json.dumps(good))
    printed = report("--print", results=tmp_path)
    row = "| `x.py` | a rate | 1/s | 1 | 1 | 1 | 1 | - | 1.0-2.0 | 2026-12-07 | abc1234 |"
    assert printed.returncode == 0 and row in printed.stdout, printed.stdout + printed.stderr
    for broken in ({**run, "date": "yesterday"}, {**run, "load": 3}, {**run, "figures": []},
                   {**run, "figures": [{"name": "a rate", "unit": "1/s", "values": ["fast"]}]}):
        (tmp_path / "x.json").write_text(json.dumps({**good, "runs": [broken]}))
        refused = report("--print", results=tmp_path)
        assert refused.returncode != 0 and "x.json" in refused.stdout + refused.stderr, broken


def test_a_table_edited_by_hand_is_out_of_date(tmp_path):
    readme = (ROOT / "bench" / "README.md").read_text()
    begin = readme.index("<!-- results table")
    row = readme.index("\n| `", begin) + 1
    edited = readme[:row] + readme[row:].replace("|", "| 1 |", 1)
    assert edited != readme
    # The check compares with the README it is given: run it on a copy of the tree's bench folder.
    copy = tmp_path / "bench"
    copy.mkdir()
    (copy / "README.md").write_text(edited)
    (copy / "report.py").write_text(REPORT.read_text())
    env = {**os.environ, "BENCH_RESULTS_DIR": str(ROOT / "bench" / "results")}
    checked = subprocess.run([sys.executable, str(copy / "report.py"), "--check"], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=60)
    assert checked.returncode == 1, checked.stdout + checked.stderr
