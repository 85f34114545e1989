"""The container image's entrypoint and health check, standard library only (no curl in the slim image).

`python -m portal.container run CMD...` prepares the writable scratch folders (the Prometheus multiprocess folder
emptied: its files belong to the processes of the last start) and becomes CMD, so signals reach it as PID 1.
`python -m portal.container check URL` exits 0 when URL answers 200 (web /healthz, the worker's and the watcher's
metrics ports); `check --file PATH --max-age SECONDS` when a file starting with PATH changed that recently (beat's
schedule file, which beat writes as it runs).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
import urllib.request
from pathlib import Path


def run(command: list[str]) -> None:
    if not command:
        sys.exit("portal.container run: give the command to run")
    if multiproc := os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        shutil.rmtree(multiproc, ignore_errors=True)
        Path(multiproc).mkdir(parents=True)
    if run_dir := os.environ.get("PORTAL_RUN_DIR"):
        Path(run_dir).mkdir(parents=True, exist_ok=True)
    os.execvp(command[0], command)  # noqa: S606 - the container's own command, as given to the entrypoint


def check(url: str | None, file: str | None, max_age: float) -> int:
    if file:
        path = Path(file)
        ages = [time.time() - candidate.stat().st_mtime for candidate in path.parent.glob(f"{path.name}*")]
        return 0 if ages and min(ages) <= max_age else 1
    if not url or not url.startswith("http://"):
        return 2
    try:
        with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 - http:// only, checked above
            return 0 if response.status == 200 else 1
    except OSError:
        return 1


def main(argv: list[str]) -> int:
    if argv[:1] == ["run"]:
        run(argv[1:])
    parser = argparse.ArgumentParser(prog="python -m portal.container check")
    parser.add_argument("url", nargs="?")
    parser.add_argument("--file")
    parser.add_argument("--max-age", type=float, default=600.0)
    options = parser.parse_args(argv[1:] if argv[:1] == ["check"] else argv)
    return check(options.url, options.file, options.max_age)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
