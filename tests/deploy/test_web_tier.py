"""How the web is served, the same in every artefact: gunicorn.conf.py holds every setting of the web tier (a worker
class whose timeout does not cut a long response, threads for the follows beside the pages, the database pool), and
make run (portal/launcher.py), the image, compose and the manifests start gunicorn with nothing but an address, from
the directory that holds that file, with nothing in their environment overriding it."""

from __future__ import annotations

import json
import os
import re
import runpy
import sys
from pathlib import Path

import pytest
import yaml
from gunicorn.config import Config

from portal import launcher

ROOT = Path(__file__).resolve().parents[2]
GUNICORN_ENV = ("GUNICORN_CMD_ARGS", "WEB_CONCURRENCY", "WEB_THREADS", "WEB_TIMEOUT", "DATABASE_POOL_SIZE")
FOLLOWERS, CLIENTS = 50, 20  # docs/architecture.md, Serving the portal: what one small installation must carry


def load_conf(monkeypatch: pytest.MonkeyPatch, **env: str) -> Config:
    """gunicorn's settings as gunicorn reads ./gunicorn.conf.py, under `env`; the environment is put back after."""
    for name in GUNICORN_ENV:
        monkeypatch.setenv(name, "")  # remembered, so the teardown restores what was there
        monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    config = Config()
    for name, value in runpy.run_path(str(ROOT / "gunicorn.conf.py")).items():
        if name in config.settings:
            config.set(name, value)
    return config


def web_commands() -> dict[str, list[str]]:
    """The web's command in each artefact, from `gunicorn` on."""
    (web,) = [child for child in launcher.services() if child.name == "web"]
    assert web.argv[:3] == [sys.executable, "-m", "gunicorn"]
    dockerfile = (ROOT / "Dockerfile").read_text()
    (cmd,) = re.findall(r"(?m)^CMD (\[.*\])$", dockerfile)
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]["web"]
    manifest = next(doc for doc in yaml.safe_load_all((ROOT / "deploy" / "base" / "web.yaml").read_text())
                    if doc["kind"] == "Deployment")
    (container,) = [c for c in manifest["spec"]["template"]["spec"]["containers"] if c["name"] == "web"]
    return {"make run": ["gunicorn", *web.argv[3:]], "image": json.loads(cmd), "compose": compose["command"],
            "manifests": container["command"]}


def test_the_config_serves_with_threads_that_outlast_the_worker_timeout(monkeypatch):
    config = load_conf(monkeypatch)
    assert config.worker_class_str == "gthread"  # sync would end every request at `timeout`: a follow at 30 s
    assert config.workers >= 2 and config.threads >= FOLLOWERS + CLIENTS
    assert not config.preload_app  # each worker builds its own database pool after the fork
    assert config.accesslog == "-" and config.keepalive > 0
    if "control_socket_disable" in config.settings:  # gunicorn 25.1 and later: no socket in a read-only $HOME
        assert config.settings["control_socket_disable"].get() is True
    pool = int(os.environ["DATABASE_POOL_SIZE"])
    assert 0 < pool < config.threads  # the threads share a few connections; a follow holds none between its polls
    resized = load_conf(monkeypatch, WEB_THREADS="8", WEB_CONCURRENCY="3", DATABASE_POOL_SIZE="4")
    assert (resized.threads, resized.workers, os.environ["DATABASE_POOL_SIZE"]) == (8, 3, "4")


def test_every_start_of_the_web_passes_only_an_address():
    commands = web_commands()
    assert set(commands) == {"make run", "image", "compose", "manifests"}
    for artefact, command in commands.items():
        assert command[:2] == ["gunicorn", "portal.wsgi:application"], artefact
        assert command[2] == "--bind" and len(command) == 4, f"{artefact} overrides gunicorn.conf.py: {command}"


def test_every_start_reads_the_config_from_its_working_directory():
    assert (launcher.BASE_DIR / "gunicorn.conf.py").is_file()  # the launcher runs its children there
    final = re.split(r"(?m)^FROM ", (ROOT / "Dockerfile").read_text())[-1]
    assert re.search(r"(?m)^WORKDIR /app$", final)
    assert re.search(r"(?m)^COPY .*\bgunicorn\.conf\.py \./$", final)
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]["web"]
    assert compose.get("working_dir", "/app") == "/app"
    manifest = next(doc for doc in yaml.safe_load_all((ROOT / "deploy" / "base" / "web.yaml").read_text())
                    if doc["kind"] == "Deployment")
    for container in manifest["spec"]["template"]["spec"]["containers"]:
        assert container.get("workingDir", "/app") == "/app"


def test_no_artefact_overrides_the_config_from_its_environment():
    final = re.split(r"(?m)^FROM ", (ROOT / "Dockerfile").read_text())[-1]
    texts = {
        "Dockerfile": final,
        "docker-compose.yml": (ROOT / "docker-compose.yml").read_text(),
        **{str(path.relative_to(ROOT)): path.read_text() for path in sorted((ROOT / "deploy").rglob("*"))
           if path.is_file() and path.suffix in {".yaml", ".env", ".example"}},
    }
    for name, text in texts.items():
        for variable in GUNICORN_ENV:
            assert not re.search(rf"\b{variable}\b", text), f"{name} sets {variable}"
