"""The results table of bench/README.md, written by the benches, never by hand.

Each bench ends with `record(...)`: its headline figures (each the values of one run: a rate, a percentile, a
size), the machine's load average before and after, the date and the commit of the tree it ran from
(`-dirty-<hash of the diff>` when tracked files differed from it), appended to bench/results/<bench>.json (the last
RUNS_KEPT runs kept). This script renders one row per bench, figure and commit from those files between the two
markers in bench/README.md: how many runs, the min / median / max of their values, the load range, the dates.

A bench writes elsewhere when BENCH_RESULTS_DIR is set (the smoke runs in CI do, so they never touch the committed
results).

Usage: python bench/report.py            rewrite the table in bench/README.md from bench/results/
       python bench/report.py --check    exit 1 when the table is not what bench/results/ gives
       python bench/report.py --print    print the table
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
README = ROOT / "bench" / "README.md"
BEGIN = "<!-- results table: written by bench/report.py from bench/results/; do not edit by hand -->"
END = "<!-- end of the results table -->"
RUNS_KEPT = 30
FORMAT = 1


@dataclass
class Figure:
    """One headline figure of a run: its name says what and at what size, `values` what this run measured (one or
    more, e.g. one per repetition)."""

    name: str
    unit: str
    values: list[float]
    target: str = ""


@dataclass
class Machine:
    """The load average when the run began (the machine may be shared: every figure says how busy it was)."""

    load_before: float = field(default_factory=lambda: os.getloadavg()[0])

    @staticmethod
    def uptime() -> str:
        return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def results_dir() -> Path:
    return Path(os.environ.get("BENCH_RESULTS_DIR") or RESULTS)


def commit() -> str:
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False).stdout.strip()

    head = git("rev-parse", "--short=7", "HEAD") or "unknown"
    outside_results = ["--", ".", ":!bench/results", ":!bench/README.md"]  # what recording itself changes
    if not git("status", "--porcelain", "--untracked-files=no", *outside_results):
        return head
    # Changed tracked files: which changes, so two different uncommitted trees never share a row.
    diff = git("diff", "HEAD", *outside_results)
    return f"{head}-dirty-{hashlib.sha1(diff.encode(), usedforsecurity=False).hexdigest()[:7]}"


def record(bench: str, arguments: dict[str, Any], figures: list[Figure], machine: Machine) -> Path:
    """Append this run to <results>/<bench>.json; returns the file."""
    folder = results_dir()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{Path(bench).stem}.json"
    data = json.loads(path.read_text()) if path.exists() else {"format": FORMAT, "bench": bench, "runs": []}
    data["runs"].append({
        "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "commit": commit(),
        "load": [round(machine.load_before, 2), round(os.getloadavg()[0], 2)],
        "cpus": os.cpu_count(),
        "arguments": {key: value for key, value in arguments.items() if isinstance(value, (str, int, float, bool))},
        "figures": [{"name": f.name, "unit": f.unit, "values": [float(v) for v in f.values], "target": f.target}
                    for f in figures],
    })
    data["runs"] = data["runs"][-RUNS_KEPT:]
    path.write_text(json.dumps(data, indent=1) + "\n")
    print(f"results recorded in {path}")
    return path


def validate(data: Any) -> list[str]:
    """What is wrong with a results file's shape (empty: nothing)."""
    problems = []
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("bench"), str):
        return ["not a results file of format 1 (format, bench, runs)"]
    for index, run in enumerate(data.get("runs") or [None]):
        where = f"run {index}"
        if not isinstance(run, dict):
            problems.append(f"{where}: not an object")
            continue
        try:
            datetime.strptime(run["date"] + "+0000", "%Y-%m-%dT%H:%M:%SZ%z")
        except (KeyError, TypeError, ValueError):
            problems.append(f"{where}: date is not YYYY-MM-DDTHH:MM:SSZ")
        if not isinstance(run.get("commit"), str) or not run["commit"]:
            problems.append(f"{where}: no commit")
        load = run.get("load")
        if not (isinstance(load, list) and len(load) == 2 and all(isinstance(x, (int, float)) for x in load)):
            problems.append(f"{where}: load is not [before, after]")
        figures = run.get("figures")
        if not isinstance(figures, list) or not figures:
            problems.append(f"{where}: no figures")
            continue
        for figure in figures:
            if not (isinstance(figure, dict) and isinstance(figure.get("name"), str) and figure["name"]
                    and isinstance(figure.get("unit"), str) and isinstance(figure.get("target", ""), str)
                    and isinstance(figure.get("values"), list) and figure["values"]
                    and all(isinstance(v, (int, float)) for v in figure["values"])):
                problems.append(f"{where}: a figure is not {{name, unit, values: [numbers], target}}")
    return problems


def load_results(folder: Path) -> list[dict]:
    files = []
    for path in sorted(folder.glob("*.json")):
        data = json.loads(path.read_text())
        if problems := validate(data):
            raise SystemExit(f"{path}: " + "; ".join(problems))
        files.append(data)
    return files


def _number(value: float) -> str:
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.2f}".rstrip("0").rstrip(".") if abs(value) < 10 else f"{value:.1f}"


def render(files: list[dict]) -> str:
    rows: dict[tuple[str, str, str], dict] = {}
    for data in files:
        for run in data["runs"]:
            for figure in run["figures"]:
                key = (data["bench"], figure["name"], run["commit"])
                row = rows.setdefault(key, {"unit": figure["unit"], "target": figure.get("target", ""),
                                            "values": [], "loads": [], "dates": [], "runs": 0})
                row["values"] += figure["values"]
                row["loads"] += run["load"]
                row["dates"].append(run["date"])
                row["runs"] += 1
    lines = ["| bench | figure | unit | runs | min | median | max | target | load (1 min) | date (UTC) | commit |",
             "|---|---|---|---:|---:|---:|---:|---|---|---|---|"]
    for (bench, name, tree), row in sorted(rows.items(), key=lambda item: (item[0][0], item[0][1],
                                                                             min(item[1]["dates"]), item[0][2])):
        values, loads, dates = row["values"], row["loads"], sorted({date[:10] for date in row["dates"]})
        lines.append(
            f"| `{bench}` | {name} | {row['unit']} | {row['runs']} | {_number(min(values))} | "
            f"{_number(statistics.median(values))} | {_number(max(values))} | {row['target'] or '-'} | "
            f"{min(loads):.1f}-{max(loads):.1f} | {dates[0] if len(dates) == 1 else f'{dates[0]} to {dates[-1]}'} | "
            f"{tree} |")
    return "\n".join(lines)


def rewritten(readme: str, table: str) -> str:
    if readme.count(BEGIN) != 1 or readme.count(END) != 1 or readme.index(BEGIN) > readme.index(END):
        raise SystemExit(f"{README} needs the two markers, in order:\n{BEGIN}\n{END}")
    head, rest = readme.split(BEGIN)
    _, tail = rest.split(END)
    return f"{head}{BEGIN}\n{table}\n{END}{tail}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="exit 1 when README's table is out of date")
    mode.add_argument("--print", action="store_true", help="print the table only")
    args = parser.parse_args()
    table = render(load_results(results_dir()))
    if args.print:
        print(table)
        return 0
    readme = README.read_text()
    wanted = rewritten(readme, table)
    if args.check:
        if wanted != readme:
            print(f"{README}'s results table is not what bench/results/ gives: run python bench/report.py")
            return 1
        print("the results table is up to date")
        return 0
    README.write_text(wanted)
    print(f"{README}: results table rewritten ({table.count(chr(10)) - 1} rows)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
