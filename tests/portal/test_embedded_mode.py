"""The embedded mode (`make run`, no DATABASE_URL or REDIS_URL): SQLite and the folder broker set up so a burst of
submissions goes through at once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import portal.settings as defaults
from portal import launcher

ROOT = Path(__file__).resolve().parents[2]
PROBE = """
import json, django
django.setup()
from django.conf import settings
from django.db import connection
with connection.cursor() as cursor:
    cursor.execute("PRAGMA journal_mode")
    journal = cursor.fetchone()[0]
    cursor.execute("PRAGMA synchronous")
    synchronous = cursor.fetchone()[0]
print(json.dumps({"journal": journal, "synchronous": synchronous, "transport": settings.CELERY_BROKER_TRANSPORT,
                  "engine": settings.DATABASES["default"]["ENGINE"],
                  "prefetch": settings.CELERY_WORKER_PREFETCH_MULTIPLIER}))
"""


def embedded_settings(run_dir: Path, **extra: str) -> dict:
    env = {key: value for key, value in os.environ.items() if key not in {"DATABASE_URL", "REDIS_URL"}}
    env.update(PORTAL_RUN_DIR=str(run_dir), DJANGO_SETTINGS_MODULE="portal.settings", **extra)
    result = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=120, check=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_sqlite_keeps_a_write_ahead_log_so_readers_never_wait_for_a_writer(tmp_path):
    probed = embedded_settings(tmp_path)
    assert probed["journal"] == "wal"
    assert probed["synchronous"] == 1  # NORMAL: the log is synced at checkpoints
    assert probed["engine"] == "portal.sqlite"  # a process's writers queue in the process (tests/portal/test_sqlite.py)


def test_the_folder_broker_writes_whole_messages_and_the_worker_takes_a_burst_at_once(tmp_path):
    probed = embedded_settings(tmp_path)
    assert probed["transport"] == "portal.broker:Transport"
    assert probed["prefetch"] > 1
    with_redis = embedded_settings(tmp_path, REDIS_URL="redis://127.0.0.1:1/0")
    assert with_redis["transport"] is None and with_redis["prefetch"] == 1


def test_make_run_runs_the_worker_with_threads_and_beat_inside_and_one_web_process(monkeypatch):
    monkeypatch.delenv("WEB_CONCURRENCY", raising=False)
    children = {child.name: child for child in launcher.services()}
    assert set(children) == {"worker", "notifier", "watcher", "web"}
    worker = children["worker"].argv
    assert worker[worker.index("--pool") + 1] == "threads" and "--beat-thread" in worker
    # Each queue its own worker (portal/settings.py's names), so a slow receiver never holds a submit's thread.
    notifier = children["notifier"].argv
    assert notifier[notifier.index("--pool") + 1] == "threads" and "--beat-thread" not in notifier
    assert worker[worker.index("--queues") + 1] == defaults.CELERY_TASK_DEFAULT_QUEUE
    assert notifier[notifier.index("--queues") + 1] == defaults.NOTIFICATIONS_QUEUE
    assert children["web"].extra == {"WEB_CONCURRENCY": "1"}
    kubesim = launcher.kubesim_child(Path("kubeconfig")).argv
    assert "--async-settle" in kubesim


def test_make_runs_cluster_has_the_nodes_of_the_demos_kai_pool():
    """seed_demo adds the KAI pool to the organisation; the embedded kubesim must have its nodes, labelled as the pool
    selects them and as KAI's shard and kubesim's fraction sharing read them."""
    from apps.org.demo import KAI_POOL
    from kubesim.apiserver.nodes.cluster import kai_demo_pool

    assert "--with-kai-pool" in launcher.kubesim_child(Path("kubeconfig")).argv
    nodes = kai_demo_pool()
    assert sum(int(node["allocatable"][KAI_POOL["gpu_resource"]]) for node in nodes) == KAI_POOL["capacity"]
    for node in nodes:
        assert KAI_POOL["node_labels"].items() <= node["labels"].items()
        assert node["labels"]["nvidia.com/gpu.product"] == KAI_POOL["gpu_product"]
        assert node["labels"]["kubesim.io/kai-gpu-sharing"] == "true"
