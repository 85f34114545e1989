"""The web tier as it is served (gunicorn with ./gunicorn.conf.py, on this test's database): a log follow lasts past
the worker timeout while 20 other follows stream and pages keep answering within a second, and the follows hold no
database connection between their polls. The timeout is shortened by configuration (WEB_TIMEOUT=5) so the test is
short: a sync worker would be killed, and its follows cut, after 5 s here as it was after 30 s before. The figures of
an hour-long and a 60 s follow under the full load are bench/follow_load.py's (bench/README.md)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import requests
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from django.utils import timezone

from apps.org.models import NodePool, Project
from apps.workloads import services
from apps.workloads.models import Kind, WorkloadLogTail
from tests.api_support import personal_token
from tests.apps.workloads.test_views_queue import running

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[2]
WORKER_TIMEOUT = 5
FOLLOW_SECONDS = 3 * WORKER_TIMEOUT
FOLLOWERS = 20
POOL_SIZE = 3
PAGE_LIMIT = 1.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def database_url() -> str:
    database = settings.DATABASES["default"]
    if "postgresql" not in database["ENGINE"]:
        return f"sqlite:///{database['NAME']}"
    password = f":{database['PASSWORD']}" if database.get("PASSWORD") else ""
    return (f"postgres://{database['USER']}{password}@{database['HOST'] or '127.0.0.1'}:{database['PORT'] or 5432}/"
            f"{database['NAME']}")


@pytest.fixture
def served(tmp_path, transactional_db):
    """gunicorn as every artefact starts it (only --bind; the rest from ./gunicorn.conf.py) on the test database,
    with the embedded broker in a folder of its own; stopped by the pid recorded here."""
    port = free_port()
    env = {**os.environ, "PORTAL_MODE": "embedded", "DATABASE_URL": database_url(), "REDIS_URL": "",
           "PORTAL_RUN_DIR": str(tmp_path), "STATIC_ROOT": str(tmp_path / "static"), "LOG_LEVEL": "WARNING",
           "WEB_TIMEOUT": str(WORKER_TIMEOUT), "DATABASE_POOL_SIZE": str(POOL_SIZE)}
    for name in ("GUNICORN_CMD_ARGS", "WEB_CONCURRENCY", "WEB_THREADS"):  # the configuration as shipped
        env.pop(name, None)
    (tmp_path / "broker" / "control").mkdir(parents=True)
    subprocess.run([sys.executable, "manage.py", "collectstatic", "--noinput", "--verbosity", "0"], cwd=ROOT,
                   env=env, check=True, timeout=120)
    log = (tmp_path / "web.log").open("wb")
    process = subprocess.Popen([sys.executable, "-m", "gunicorn", "portal.wsgi:application", "--bind",
                                f"127.0.0.1:{port}"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                               start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError as refused:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError((tmp_path / "web.log").read_text()) from refused
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(60)
        log.close()


def database_connections() -> int:
    """Connections to the test database other than this thread's own."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                       "AND pid <> pg_backend_pid()")
        return cursor.fetchone()[0]


def test_follows_outlast_the_worker_timeout_while_pages_answer(served):
    alice = get_user_model().objects.get(username="alice")
    workload = running(services.workload_submit(
        actor=alice, project=Project.objects.get(slug="vision"), node_pool=NodePool.objects.get(slug="h100"),
        kind=Kind.TRAINING, name="long-run", image="pytorch/pytorch:2.4.0", command=["sleep", "3600"], gpus=1,
        model_label="resnet", data_class="public"))
    tail = WorkloadLogTail.objects.create(workload=workload, pod=f"wl-{workload.pk}-abcde", text="line 0\n",
                                          fetched_at=timezone.now())
    token = personal_token(alice)
    browser = Client()
    browser.force_login(alice)
    session = browser.cookies["sessionid"].value
    follow_url = f"{served}/api/v1/workloads/{workload.pk}/logs/?follow=true&timeout={FOLLOW_SECONDS}"
    page_urls = [f"/workloads/{workload.pk}/", "/workloads/", "/api/v1/workloads/"]
    warm = requests.Session()
    warm.cookies.set("sessionid", session)
    for _ in range(4):  # both workers have rendered each page once (templates compiled) before the clock runs
        for url in page_urls:
            assert warm.get(served + url, timeout=60).status_code == 200
    received: list[list[tuple[float, str]]] = [[] for _ in range(FOLLOWERS)]
    broken: list[str] = []
    page_times: list[tuple[str, int, float]] = []
    done = threading.Event()
    began = time.monotonic()

    def follower(index: int) -> None:
        try:
            with requests.get(follow_url, headers={"Authorization": f"Token {token}"}, stream=True,
                              timeout=(10, None)) as response:
                assert response.status_code == 200
                for line in response.iter_lines(decode_unicode=True):
                    received[index].append((time.monotonic() - began, line))
        except (requests.RequestException, AssertionError) as error:
            broken.append(f"{index}: {error!r}")

    def reader() -> None:
        pages = requests.Session()
        pages.cookies.set("sessionid", session)
        while not done.is_set():
            for url in page_urls:
                started = time.monotonic()
                answer = pages.get(served + url, timeout=30)
                page_times.append((url, answer.status_code, time.monotonic() - started))
            done.wait(0.2)

    threads = [threading.Thread(target=follower, args=(index,)) for index in range(FOLLOWERS)]
    for thread in threads:
        thread.start()
    # The pages are timed while the follows stream: from when every follower has its first line.
    deadline = time.monotonic() + 30
    while not all(received) and not broken and time.monotonic() < deadline:
        time.sleep(0.05)
    threads.append(threading.Thread(target=reader))
    threads[-1].start()
    most_connections = 0
    written_lines = FOLLOW_SECONDS - 3  # the last one a few seconds before the follows end: each must get them all
    for number in range(1, written_lines):  # a new line every second, as the worker's reads would store them
        time.sleep(1)
        WorkloadLogTail.objects.filter(pk=tail.pk).update(
            text="".join(f"line {n}\n" for n in range(number + 1)), fetched_at=timezone.now())
        if "postgresql" in settings.DATABASES["default"]["ENGINE"]:
            most_connections = max(most_connections, database_connections())
    for thread in threads[:FOLLOWERS]:
        thread.join(timeout=FOLLOW_SECONDS + 30)
    done.set()
    threads[-1].join(timeout=30)

    assert broken == []
    written = [f"line {n}" for n in range(written_lines)]
    for lines in received:
        # Every line, in order, none repeated; the last ones long after a sync worker would have been killed.
        assert [text for _, text in lines] == written
        assert lines[-1][0] > 2 * WORKER_TIMEOUT
    assert page_times and all(status == 200 for _, status, _ in page_times), page_times
    slowest = max(page_times, key=lambda row: row[2])
    assert slowest[2] < PAGE_LIMIT, f"{slowest[0]} took {slowest[2]:.2f} s while {FOLLOWERS} follows streamed"
    # Two workers' pools, and this test's own threads: the 20 follows hold no connection while they wait.
    assert most_connections <= 2 * POOL_SIZE + 2, most_connections
