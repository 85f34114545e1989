"""docker-compose.yml and the Dockerfile, read as an operator's tools would: production starts without demo data,
secrets come from env files, every long-running service has a health check, the demo stays on 127.0.0.1, and the
image runs as a non-root user without compilers. `docker compose config` also judges the file where it is installed.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES: dict[str, dict] = COMPOSE["services"]
PORTAL = {"web", "worker", "notifier", "beat", "watcher"}
ONE_SHOT = {"migrate", "seed-demo"}
SECRET_NAMES = re.compile(r"(SECRET|PASSWORD|TOKEN)", re.IGNORECASE)


def profile_services(profile: str | None) -> dict[str, dict]:
    """The services `docker compose [--profile P] up` starts."""
    return {name: service for name, service in SERVICES.items()
            if not service.get("profiles") or (profile is not None and profile in service["profiles"])}


def commands(service: dict) -> str:
    return " ".join(service.get("command") or [])


def test_production_starts_every_portal_process_with_its_stores():
    production = profile_services(None)
    assert set(production) == PORTAL | {"postgres", "redis", "migrate"}
    for name in PORTAL:
        depends = production[name]["depends_on"]
        assert depends["migrate"] == {"condition": "service_completed_successfully"}
        assert depends["postgres"]["condition"] == depends["redis"]["condition"] == "service_healthy"
    assert production["web"]["command"][0] == "gunicorn"  # as pyproject's dependencies provide
    assert production["redis"]["command"][1:] == ["--appendonly", "yes", "--appendfsync", "everysec"]


def test_production_never_seeds_demo_data_and_migrate_only_migrates():
    for name, service in profile_services(None).items():
        assert "seed_demo" not in commands(service), name
    assert SERVICES["migrate"]["command"] == ["python", "manage.py", "migrate", "--noinput"]
    assert SERVICES["migrate"]["restart"] == "no"
    assert "seed_demo" in commands(SERVICES["seed-demo"]) and SERVICES["seed-demo"]["profiles"] == ["demo"]


def test_the_demo_profile_adds_kubesim_and_the_demo_organisation_on_loopback_only():
    demo = profile_services("demo")
    assert set(demo) - set(profile_services(None)) == {"kubesim", "seed-demo"}
    for name, service in demo.items():
        for port in service.get("ports", []):
            published = re.sub(r"\$\{PORTAL_PUBLISH:-([^}]*)\}", r"\1", str(port))
            host = published.rsplit(":", 2)[0] if published.count(":") >= 2 else ""
            assert host == "127.0.0.1", f"{name} publishes {port} beyond the loopback"


def test_every_long_running_service_has_a_health_check():
    for name, service in SERVICES.items():
        if name in ONE_SHOT:
            assert service["restart"] == "no"
            continue
        test = service.get("healthcheck", {}).get("test")
        assert test and test[0] in {"CMD", "CMD-SHELL"}, f"{name} has no health check"
    assert SERVICES["web"]["healthcheck"]["test"][-1] == "http://127.0.0.1:8000/healthz"
    # Each fails when its process stops making progress, not merely when a port still answers.
    assert SERVICES["watcher"]["healthcheck"]["test"][-1] == "http://127.0.0.1:9102/healthz"
    assert 'inspect ping -d "celery@$$HOSTNAME" --timeout 10' in SERVICES["worker"]["healthcheck"]["test"][1]
    assert 'inspect ping -d "notifier@$$HOSTNAME" --timeout 10' in SERVICES["notifier"]["healthcheck"]["test"][1]
    assert SERVICES["beat"]["healthcheck"]["test"][-4:] == ["--file", "/tmp/portal/beat-heartbeat", "--max-age", "60"]
    assert "pg_isready" in " ".join(SERVICES["postgres"]["healthcheck"]["test"])
    assert SERVICES["redis"]["healthcheck"]["test"] == ["CMD", "redis-cli", "ping"]


def test_secrets_come_from_env_files_and_named_volumes_hold_the_state():
    example = ROOT / "deploy" / "compose.env.example"
    keys = {line.split("=", 1)[0] for line in example.read_text().splitlines() if "=" in line
            and not line.startswith("#")}
    assert {"SECRET_KEY", "POSTGRES_PASSWORD", "DATABASE_URL", "ALLOWED_HOSTS", "PORTAL_ADMIN_PASSWORD"} <= keys
    for name, service in SERVICES.items():
        for key, value in (service.get("environment") or {}).items():
            assert not SECRET_NAMES.search(key), f"{name} sets {key}={value!r} inline instead of in an env file"
        if name != "redis":
            assert service["env_file"] == "${PORTAL_ENV_FILE:-deploy/compose.env}", name
    assert "deploy/compose.env" in (ROOT / ".gitignore").read_text().splitlines()
    assert set(COMPOSE["volumes"]) == {"pgdata", "redisdata", "kube"}
    assert "pgdata:/var/lib/postgresql/data" in SERVICES["postgres"]["volumes"]
    assert "redisdata:/data" in SERVICES["redis"]["volumes"]


def _final_stage(dockerfile: str) -> list[str]:
    stages = re.split(r"(?m)^FROM ", dockerfile)
    return [line.strip() for line in stages[-1].splitlines() if line.strip() and not line.startswith("#")]


def test_the_image_is_multi_stage_non_root_and_without_compilers():
    dockerfile = (ROOT / "Dockerfile").read_text()
    froms = re.findall(r"(?m)^FROM (\S+)", dockerfile)
    assert len(froms) >= 2 and froms[-1] == "python:3.11-slim"
    final = _final_stage(dockerfile)
    text = "\n".join(final)
    assert not re.search(r"build-essential|\bgcc\b|\bg\+\+|apt-get install", text)
    users = [line.split()[1] for line in final if line.startswith("USER ")]
    assert users and users[-1].split(":")[0] not in {"0", "root"} and users[-1].split(":")[0].isdigit()
    assert "collectstatic --noinput" in text and "PORTAL_MODE=production" in text
    assert any(line.startswith("HEALTHCHECK") for line in final)
    builder = re.split(r"(?m)^FROM ", dockerfile)[1]
    assert builder.startswith("python:3.11-slim AS builder") and "build-essential" in builder  # compilers stay there
    ignored = (ROOT / ".dockerignore").read_text().splitlines()
    assert {".git", ".venv", ".run", "deploy/compose.env"} <= set(ignored)


def _docker_compose() -> list[str] | None:
    docker = shutil.which("docker")
    if docker is None:
        return None
    probe = subprocess.run([docker, "compose", "version"], capture_output=True, text=True, check=False, timeout=30)
    return [docker, "compose"] if probe.returncode == 0 else None


@pytest.mark.parametrize("profile", [None, "demo"])
def test_docker_compose_config_accepts_it(profile, tmp_path):
    compose = _docker_compose()
    if compose is None:
        pytest.skip("no docker binary with the compose plugin here")
    env_file = "deploy/compose.demo.env" if profile else "deploy/compose.env.example"
    result = subprocess.run([*compose, *(["--profile", profile] if profile else []), "config", "--quiet"],
                            cwd=ROOT, capture_output=True, text=True, check=False, timeout=60,
                            env={"PATH": "/usr/bin:/bin:/usr/local/bin", "PORTAL_ENV_FILE": env_file})
    assert result.returncode == 0, result.stderr


def test_the_image_carries_gunicorns_config_where_gunicorn_runs():
    """gunicorn reads ./gunicorn.conf.py (portal/gunicorn_hooks.py) from its working directory: the image's last
    WORKDIR, where the CMD, compose and the manifests start it."""
    final = _final_stage((ROOT / "Dockerfile").read_text())
    workdir = [line.split()[1] for line in final if line.startswith("WORKDIR ")][-1]
    copied = [line for line in final if line.startswith("COPY ") and "gunicorn.conf.py" in line.split()[1:-1]]
    assert workdir == "/app" and copied and copied[0].split()[-1] in {"./", "/app/", "/app/gunicorn.conf.py"}


def test_each_queue_has_its_worker_and_a_slow_receiver_cannot_take_the_submit_slots():
    """The worker consumes the default queue only, the notifier the notifications queue only (the names of
    portal/settings.py): nothing routed waits for a consumer, and deliveries never queue before submits."""
    import portal.settings as defaults

    def queues(service: dict) -> list[str]:
        command = service["command"]
        return command[command.index("--queues") + 1].split(",")

    assert queues(SERVICES["worker"]) == [defaults.CELERY_TASK_DEFAULT_QUEUE]
    assert queues(SERVICES["notifier"]) == [defaults.NOTIFICATIONS_QUEUE]
    assert SERVICES["notifier"]["command"][SERVICES["notifier"]["command"].index("--hostname") + 1] == "notifier@%h"
