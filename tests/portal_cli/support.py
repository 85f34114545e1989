"""Running `gpu` in the tests: in process through click's runner (its output and exit code), or as the real console
program in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result

from portal_cli.main import cli

ROOT = Path(__file__).resolve().parents[2]


def gpu(*args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), input=input)


def gpu_json(name: str, *args: str, input: str | None = None) -> Any:
    result = gpu(name, "-o", "json", *args, input=input)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def gpu_process(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "portal_cli", *args], cwd=ROOT, env=dict(os.environ),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
