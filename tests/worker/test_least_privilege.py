"""Least privilege, proven: kubesim enforces RBAC with deploy/'s ClusterRoles and bindings applied, the worker and
the watcher run with their service accounts' tokens (a kubeconfig each, as in the cluster) through a reconcile that
creates, repairs and prunes every kind it owns, submit -> admitted -> running -> finished, a queue position, a log
tail, a retried submit adopting its Job and Service, and a stop. No call may be forbidden, and every rule the
ClusterRoles grant must have been used: a verb the code no longer needs fails the test as surely as a missing one."""

from pathlib import Path

import pytest
import yaml
from django.contrib.auth import get_user_model

from apps.core.kueue_names import MANAGED_BY, MANAGED_BY_LABEL, PROJECT_LABEL
from apps.org.demo import seed_demo
from apps.org.models import NodePool, Project
from apps.workloads import services
from apps.workloads.models import Kind, Status, Workload
from kubesim.testing import serve
from tests.worker.conftest import wait_for
from worker import tasks
from worker.gateway import Gateway, api_client_from_settings, reset_gateway
from worker.kueue_sync import KIND_ORDER
from worker.manifests import job_manifest, notebook_service
from worker.watcher import Watcher

pytestmark = pytest.mark.slow

BASE = Path(__file__).resolve().parents[2] / "deploy" / "base"
PORTAL_NAMESPACE = "gpu-portal"  # the base's namespace, where its service accounts live


@pytest.fixture(scope="module")
def enforcing():
    with serve(clock="manual", rbac=True) as ks:
        yield ks


@pytest.fixture
def accounts(enforcing, tmp_path, settings):
    """deploy/'s service accounts and ClusterRoles applied; the worker's gateway (from settings.KUBECONFIG, as in
    production) and the watcher's, each authenticating with its own account's token."""
    ks = enforcing
    ks.reset()
    ks.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": PORTAL_NAMESPACE}})
    for name in ("serviceaccounts.yaml", "rbac.yaml"):
        for obj in yaml.safe_load_all((BASE / name).read_text()):
            if obj["kind"] == "ServiceAccount":
                obj["metadata"]["namespace"] = PORTAL_NAMESPACE
            ks.apply(obj)
    kubeconfigs = {name: ks.write_kubeconfig(str(tmp_path / name), ks.service_account_token(PORTAL_NAMESPACE, name))
                   for name in ("gpu-portal-watcher", "gpu-portal-worker")}
    settings.KUBECONFIG = kubeconfigs["gpu-portal-watcher"]  # the watcher process's settings
    watcher_gw = Gateway(api_client_from_settings())
    settings.KUBECONFIG = kubeconfigs["gpu-portal-worker"]
    reset_gateway(None)  # the worker's tasks build their gateway from settings.KUBECONFIG
    admin = Gateway(ks.api_client())
    ks.clear_rbac_records()
    yield admin, watcher_gw
    reset_gateway(None)


def drift(admin):
    """What a reconcile repairs and prunes: per kind it owns, one object changed behind its back and one copy it
    does not want (both carry the portal's ownership label)."""
    for kind in KIND_ORDER:
        current = admin.list(kind, label_selector=f"{MANAGED_BY_LABEL}={MANAGED_BY}")[0]
        metadata = current["metadata"]
        changed = {**current, "metadata": {**metadata}}
        if kind == "WorkloadPriorityClass":
            changed["value"] = current["value"] + 1
        else:
            label = next(k for k in metadata["labels"] if k not in (MANAGED_BY_LABEL, PROJECT_LABEL))
            changed["metadata"]["labels"] = {**metadata["labels"], label: "drifted"}
        admin.replace(changed)
        copy = {k: v for k, v in current.items() if k not in ("status", "metadata")}
        copy["metadata"] = {"name": f"stray-{metadata['name']}"[:63], "labels": metadata["labels"],
                            **({"namespace": metadata["namespace"]} if metadata.get("namespace") else {})}
        admin.create(copy)


def submit(enforcing, user, *, kind=Kind.TRAINING, gpus=4, seconds=600, name="run"):
    workload = services.workload_submit(
        actor=user, project=Project.objects.get(slug="vision"), kind=kind, name=name,
        image="pytorch/pytorch:2.4.0", command=["sleep", str(seconds)], node_pool=NodePool.objects.get(slug="h100"),
        gpus=gpus, model_label="resnet", data_class="public", preemptible=True)
    assert tasks.workload_submit.apply(args=[workload.pk]).get() == "submitted"
    enforcing.advance(1)
    return Workload.objects.get(pk=workload.pk)


def status_of(workload):
    return Workload.objects.get(pk=workload.pk).status


def test_the_cluster_roles_hold_what_a_run_uses_and_nothing_more(enforcing, accounts, transactional_db):
    admin, watcher_gw = accounts
    seed_demo()
    assert tasks.kueue_sync.apply().get()  # creates everything (and asks whether each namespace is the portal's)
    drift(admin)
    changes = tasks.kueue_sync.apply().get()
    assert sum(change.startswith("updated") for change in changes) >= len(KIND_ORDER), changes
    assert sum(change.startswith("deleted") for change in changes) == len(KIND_ORDER), changes

    alice = get_user_model().objects.get(username="alice")
    watcher = Watcher(watcher_gw, resync_seconds=3600, positions_seconds=0.2, watch_timeout_seconds=2)
    watcher.start()
    try:
        runs = [submit(enforcing, alice, name=f"run-{i}", seconds=30) for i in range(2)]
        waiting = submit(enforcing, alice, name="wait", seconds=600)  # Vision's 8 H100 are in use: it queues
        wait_for(lambda: all(status_of(w) == Status.RUNNING for w in runs))
        wait_for(lambda: Workload.objects.get(pk=waiting.pk).queue_position_local == 0)
        assert tasks.workload_logs_fetch.apply(args=[runs[0].pk]).get() >= 1
        # A retried submit finds its Job (and a notebook's Service) already there and adopts them.
        notebook = submit(enforcing, alice, kind=Kind.NOTEBOOK, gpus=1, name="nb")
        assert tasks._create_or_adopt(tasks.gateway(), job_manifest(notebook)) == notebook.k8s_uid
        tasks._create_or_adopt(tasks.gateway(), notebook_service(notebook, notebook.k8s_uid))
        # A credential is written, written again (replaced), and removed.
        credential = services.credential_create(actor=alice, project=Project.objects.get(slug="vision"),
                                                name="wandb", values={"WANDB_API_KEY": "k"})
        assert tasks.credential_sync.apply(args=[credential.pk]).get() == "applied"
        services.credential_values_replace(actor=alice, credential=credential, values={"WANDB_API_KEY": "k2"})
        assert tasks.credential_sync.apply(args=[credential.pk]).get() == "applied"
        services.credential_delete(actor=alice, credential=credential)
        assert tasks.credential_sync.apply(args=[credential.pk]).get() == "deleted"
        enforcing.advance(60)  # the runs finish, the waiting one starts
        wait_for(lambda: all(status_of(w) == Status.SUCCEEDED for w in runs))
        enforcing.advance(1)
        wait_for(lambda: status_of(waiting) == Status.RUNNING,
                 describe=lambda: (status_of(waiting), Workload.objects.get(pk=waiting.pk).status_message))
        wait_for(lambda: status_of(notebook) == Status.RUNNING)
        assert tasks.notebooks_cull_idle.apply().get() == 0  # reads the notebook server's activity
        assert Workload.objects.get(pk=notebook.pk).server_activity_mark  # its server answered
        services.workload_stop(actor=alice, workload=Workload.objects.get(pk=waiting.pk))
        assert tasks.workload_stop.apply(args=[waiting.pk]).get() == "stopped"
        wait_for(lambda: status_of(waiting) == Status.STOPPED)
    finally:
        watcher.stop()

    report = enforcing.rbac()
    assert report["enabled"] and report["denials"] == []
    used = {(g["role"], g["group"], g["resource"], g["verb"]) for g in report["grants"]}
    granted = set()
    for obj in yaml.safe_load_all((BASE / "rbac.yaml").read_text()):
        if obj["kind"] == "ClusterRole":
            granted |= {(f"ClusterRole/{obj['metadata']['name']}", group, resource, verb) for rule in obj["rules"]
                        for group in rule["apiGroups"] for resource in rule["resources"] for verb in rule["verbs"]}
    assert sorted(granted - used) == []  # granted but never used: drop it from worker/permissions.py and deploy/
    assert used <= granted
