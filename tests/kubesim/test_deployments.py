"""Deployments run as ReplicaSets and pods (kubesim.apiserver.controllers.deployment_controller): owned, labelled with
the pod template's hash, scaled, rolled over within maxSurge and maxUnavailable, pods placed against node capacity,
and `kubectl rollout status` answering from the status the controller writes."""

from __future__ import annotations

import shutil
import subprocess
from types import SimpleNamespace

import pytest
from kubernetes import client

from kubesim.testing import InProcessKubesim

KUBECTL = shutil.which("kubectl")
POOL = {"portal.gpu/pool": "h100"}  # the demo cluster's H100 pool: 2 nodes of 8 GPUs


def deployment(
    name: str,
    *,
    replicas: int,
    gpus: int = 0,
    image: str = "server:1",
    surge: object = "25%",
    unavailable: object = "25%",
) -> dict:
    resources = {"limits": {"nvidia.com/gpu": str(gpus)}} if gpus else {}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": surge, "maxUnavailable": unavailable}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "nodeSelector": POOL,
                    "containers": [{"name": "main", "image": image, "resources": resources}],
                },
            },
        },
    }


@pytest.fixture
def apps(api: SimpleNamespace) -> client.AppsV1Api:
    return client.AppsV1Api(api.client)


def _pods(api: SimpleNamespace, ns: str, name: str) -> list:
    return [
        p
        for p in api.core.list_namespaced_pod(ns, label_selector=f"app={name}").items
        if p.metadata.deletion_timestamp is None
    ]


def _rollout_status(ks: InProcessKubesim, ns: str, name: str, *, timeout: str = "20s") -> subprocess.CompletedProcess:
    assert KUBECTL is not None
    return subprocess.run(
        [
            KUBECTL,
            "--kubeconfig",
            ks.kubeconfig_path,
            "rollout",
            "status",
            f"deployment/{name}",
            "-n",
            ns,
            f"--timeout={timeout}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_a_deployment_owns_a_replicaset_that_owns_its_running_pods(api, apps, ns, ks):
    created = apps.create_namespaced_deployment(ns, deployment("web", replicas=3))
    (rs,) = apps.list_namespaced_replica_set(ns).items
    template_hash = rs.metadata.labels["pod-template-hash"]
    assert rs.metadata.name == f"web-{template_hash}"
    assert [(o.kind, o.uid, o.controller) for o in rs.metadata.owner_references] == [
        ("Deployment", created.metadata.uid, True)
    ]
    assert rs.spec.selector.match_labels == {"app": "web", "pod-template-hash": template_hash}
    pods = _pods(api, ns, "web")
    assert len(pods) == 3
    for pod in pods:
        assert pod.metadata.name.startswith(f"web-{template_hash}-")
        assert pod.metadata.labels["pod-template-hash"] == template_hash
        assert [o.uid for o in pod.metadata.owner_references] == [rs.metadata.uid]
        assert pod.status.phase == "Running" and pod.spec.node_name
    web = apps.read_namespaced_deployment("web", ns)
    assert (
        web.status.observed_generation,
        web.status.replicas,
        web.status.updated_replicas,
        web.status.ready_replicas,
        web.status.available_replicas,
    ) == (1, 3, 3, 3, 3)
    assert {c.type: (c.status, c.reason) for c in web.status.conditions} == {
        "Available": ("True", "MinimumReplicasAvailable"),
        "Progressing": ("True", "NewReplicaSetAvailable"),
    }


def test_scaling_adds_and_removes_pods(api, apps, ns):
    apps.create_namespaced_deployment(ns, deployment("web", replicas=1))
    apps.patch_namespaced_deployment_scale("web", ns, {"spec": {"replicas": 4}})
    assert len(_pods(api, ns, "web")) == 4
    assert apps.read_namespaced_deployment("web", ns).status.ready_replicas == 4
    apps.patch_namespaced_deployment_scale("web", ns, {"spec": {"replicas": 2}})
    assert len(_pods(api, ns, "web")) == 2
    assert len(apps.list_namespaced_replica_set(ns).items) == 1


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not on PATH")
def test_a_rollout_without_surge_fits_a_full_pool_and_kubectl_sees_it_finish(api, apps, ns, ks):
    """Two 8-GPU replicas fill the pool: with maxSurge 0 the rollout replaces one at a time and completes."""
    apps.create_namespaced_deployment(ns, deployment("llm", replicas=2, gpus=8, surge=0, unavailable=1))
    first = {p.metadata.name for p in _pods(api, ns, "llm")}
    apps.patch_namespaced_deployment(
        "llm",
        ns,
        {
            "spec": {
                "template": {
                    "spec": {
                        "containers": [
                            {"name": "main", "image": "server:2", "resources": {"limits": {"nvidia.com/gpu": "8"}}}
                        ]
                    }
                }
            }
        },
    )
    done = _rollout_status(ks, ns, "llm")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith('deployment "llm" successfully rolled out')
    pods = _pods(api, ns, "llm")
    assert {p.spec.containers[0].image for p in pods} == {"server:2"} and not first & {p.metadata.name for p in pods}
    replicasets = {
        rs.metadata.annotations["deployment.kubernetes.io/revision"]: rs.spec.replicas
        for rs in apps.list_namespaced_replica_set(ns).items
    }
    assert replicasets == {"1": 0, "2": 2}
    scaled = [e.message for e in api.core.list_namespaced_event(ns).items if e.reason == "ScalingReplicaSet"]
    assert any(m.startswith("Scaled down replica set llm-") and m.endswith("from 2 to 1") for m in scaled), scaled
    apps.delete_namespaced_deployment("llm", ns)
    assert not _pods(api, ns, "llm") and not apps.list_namespaced_replica_set(ns).items


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not on PATH")
def test_a_surge_that_does_not_fit_keeps_the_old_pods_and_the_rollout_waits(api, apps, ns, ks):
    """maxUnavailable 0: no old replica goes before a new one is ready, and the new one finds no free GPUs."""
    apps.create_namespaced_deployment(ns, deployment("llm", replicas=2, gpus=8, surge=1, unavailable=0))
    apps.patch_namespaced_deployment(
        "llm",
        ns,
        {
            "spec": {
                "template": {
                    "spec": {
                        "containers": [
                            {"name": "main", "image": "server:2", "resources": {"limits": {"nvidia.com/gpu": "8"}}}
                        ]
                    }
                }
            }
        },
    )
    pods = _pods(api, ns, "llm")
    assert sorted((p.spec.containers[0].image, p.status.phase) for p in pods) == [
        ("server:1", "Running"),
        ("server:1", "Running"),
        ("server:2", "Pending"),
    ]
    status = apps.read_namespaced_deployment("llm", ns).status
    assert (status.replicas, status.updated_replicas, status.available_replicas) == (3, 1, 2)
    assert {c.type: (c.status, c.reason) for c in status.conditions}["Progressing"] == ("True", "ReplicaSetUpdated")
    waiting = _rollout_status(ks, ns, "llm", timeout="2s")
    assert waiting.returncode != 0
    assert "1 out of 2 new replicas have been updated" in waiting.stdout
    apps.patch_namespaced_deployment_scale("llm", ns, {"spec": {"replicas": 1}})  # room: the new one starts
    assert _rollout_status(ks, ns, "llm").returncode == 0
    assert [(p.spec.containers[0].image, p.status.phase) for p in _pods(api, ns, "llm")] == [("server:2", "Running")]
    apps.delete_namespaced_deployment("llm", ns)


def _kubectl(ks: InProcessKubesim, *args: str) -> subprocess.CompletedProcess:
    assert KUBECTL is not None
    return subprocess.run(
        [KUBECTL, "--kubeconfig", ks.kubeconfig_path, *args], capture_output=True, text=True, timeout=60, check=False
    )


def _conditions(apps: client.AppsV1Api, ns: str, name: str) -> dict[str, tuple[str, str]]:
    return {c.type: (c.status, c.reason) for c in apps.read_namespaced_deployment(name, ns).status.conditions or []}


def _revisions(apps: client.AppsV1Api, ns: str) -> dict[str, str]:
    """Each ReplicaSet's revision annotation -> its first container's image."""
    return {
        rs.metadata.annotations["deployment.kubernetes.io/revision"]: rs.spec.template.spec.containers[0].image
        for rs in apps.list_namespaced_replica_set(ns).items
    }


def test_a_deployment_is_defaulted_as_apps_v1_defaults_it(apps, ns):
    body = deployment("web", replicas=1)
    del body["spec"]["strategy"], body["spec"]["replicas"]
    spec = apps.create_namespaced_deployment(ns, body).spec
    assert (spec.replicas, spec.revision_history_limit, spec.progress_deadline_seconds) == (1, 10, 600)
    assert spec.strategy.type == "RollingUpdate"
    assert (spec.strategy.rolling_update.max_surge, spec.strategy.rolling_update.max_unavailable) == ("25%", "25%")


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not on PATH")
def test_a_rollout_without_progress_exceeds_its_deadline_and_progress_clears_it(api, apps, ns, ks):
    body = deployment("web", replicas=1)
    body["spec"]["progressDeadlineSeconds"] = 30
    body["spec"]["template"]["spec"]["nodeSelector"] = {"portal.gpu/pool": "none"}  # fits no node
    apps.create_namespaced_deployment(ns, body)
    assert _conditions(apps, ns, "web")["Progressing"] == ("True", "ReplicaSetUpdated")
    ks.advance(30)
    assert _conditions(apps, ns, "web")["Progressing"] == ("True", "ReplicaSetUpdated")
    ks.advance(2)
    status = apps.read_namespaced_deployment("web", ns).status
    [progressing] = [c for c in status.conditions if c.type == "Progressing"]
    rs_name = apps.list_namespaced_replica_set(ns).items[0].metadata.name
    assert (progressing.status, progressing.reason, progressing.message) == (
        "False",
        "ProgressDeadlineExceeded",
        f'ReplicaSet "{rs_name}" has timed out progressing.',
    )
    assert _conditions(apps, ns, "web")["Available"] == ("False", "MinimumReplicasUnavailable")
    done = _rollout_status(ks, ns, "web")
    assert done.returncode != 0
    assert 'deployment "web" exceeded its progress deadline' in done.stderr
    # a fix rolls out a new ReplicaSet: progress again, then a finished rollout
    apps.patch_namespaced_deployment("web", ns, {"spec": {"template": {"spec": {"nodeSelector": POOL}}}})
    assert _conditions(apps, ns, "web") == {
        "Available": ("True", "MinimumReplicasAvailable"),
        "Progressing": ("True", "NewReplicaSetAvailable"),
    }
    assert _rollout_status(ks, ns, "web").returncode == 0


def test_a_deployment_without_a_deadline_has_no_progressing_condition(apps, ns):
    body = deployment("web", replicas=1)
    body["spec"]["progressDeadlineSeconds"] = 2**31 - 1  # "never", as upstream's MaxInt32
    apps.create_namespaced_deployment(ns, body)
    assert _conditions(apps, ns, "web") == {"Available": ("True", "MinimumReplicasAvailable")}


def test_pods_are_available_only_after_min_ready_seconds(api, apps, ns, ks):
    body = deployment("web", replicas=2)
    body["spec"]["minReadySeconds"] = 20
    apps.create_namespaced_deployment(ns, body)
    assert all(p.status.phase == "Running" for p in _pods(api, ns, "web"))
    status = apps.read_namespaced_deployment("web", ns).status
    assert (status.ready_replicas, status.available_replicas, status.unavailable_replicas) == (2, None, 2)
    assert _conditions(apps, ns, "web") == {
        "Available": ("False", "MinimumReplicasUnavailable"),
        "Progressing": ("True", "ReplicaSetUpdated"),
    }
    [rs] = apps.list_namespaced_replica_set(ns).items
    assert (rs.spec.min_ready_seconds, rs.status.ready_replicas, rs.status.available_replicas) == (20, 2, None)
    ks.advance(19)
    assert apps.read_namespaced_deployment("web", ns).status.available_replicas is None
    ks.advance(1)  # no write needed: the controller wakes when the pods have been ready long enough
    status = apps.read_namespaced_deployment("web", ns).status
    assert (status.available_replicas, status.unavailable_replicas) == (2, None)
    assert _conditions(apps, ns, "web") == {
        "Available": ("True", "MinimumReplicasAvailable"),
        "Progressing": ("True", "NewReplicaSetAvailable"),
    }


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not on PATH")
def test_kubectl_rollout_undo_brings_an_older_replicaset_back_as_the_newest_revision(api, apps, ns, ks):
    body = deployment("web", replicas=2)
    body["metadata"]["annotations"] = {"kubernetes.io/change-cause": "first"}
    apps.create_namespaced_deployment(ns, body)
    assert _kubectl(ks, "set", "image", "deployment/web", "main=server:2", "-n", ns).returncode == 0
    apps.patch_namespaced_deployment("web", ns, {"metadata": {"annotations": {"kubernetes.io/change-cause": "second"}}})
    assert _revisions(apps, ns) == {"1": "server:1", "2": "server:2"}
    web = apps.read_namespaced_deployment("web", ns)
    assert web.metadata.annotations["deployment.kubernetes.io/revision"] == "2"
    history = _kubectl(ks, "rollout", "history", "deployment/web", "-n", ns)
    assert history.returncode == 0, history.stderr
    rows = [line.split() for line in history.stdout.splitlines()[2:] if line.strip()]
    assert rows == [["1", "first"], ["2", "second"]]

    undo = _kubectl(ks, "rollout", "undo", "deployment/web", "-n", ns)
    assert undo.returncode == 0, undo.stderr
    assert undo.stdout.strip() == "deployment.apps/web rolled back"
    assert _rollout_status(ks, ns, "web").returncode == 0
    # the first ReplicaSet is the current one again, under a new revision; no third ReplicaSet was made
    assert _revisions(apps, ns) == {"3": "server:1", "2": "server:2"}
    [back] = [rs for rs in apps.list_namespaced_replica_set(ns).items if rs.spec.template.spec.containers[0].image
              == "server:1"]
    assert back.metadata.annotations["deployment.kubernetes.io/revision-history"] == "1"
    assert back.spec.replicas == 2
    web = apps.read_namespaced_deployment("web", ns)
    assert web.metadata.annotations["deployment.kubernetes.io/revision"] == "3"
    assert web.metadata.annotations["kubernetes.io/change-cause"] == "first"  # kubectl restored the ReplicaSet's
    assert {p.spec.containers[0].image for p in _pods(api, ns, "web")} == {"server:1"}

    again = _kubectl(ks, "rollout", "undo", "deployment/web", "-n", ns, "--to-revision=3")
    assert again.stdout.strip() == "deployment.apps/web skipped rollback (current template already matches revision 3)"
    assert _kubectl(ks, "rollout", "undo", "deployment/web", "-n", ns, "--to-revision=2").returncode == 0
    assert _revisions(apps, ns) == {"3": "server:1", "4": "server:2"}
    assert {p.spec.containers[0].image for p in _pods(api, ns, "web")} == {"server:2"}


def test_old_replicasets_beyond_the_revision_history_limit_are_deleted(apps, ns):
    body = deployment("web", replicas=1)
    body["spec"]["revisionHistoryLimit"] = 1
    apps.create_namespaced_deployment(ns, body)
    for image in ("server:2", "server:3", "server:4"):
        patch = {"spec": {"template": {"spec": {"containers": [{"name": "main", "image": image}]}}}}
        apps.patch_namespaced_deployment("web", ns, patch)
    assert _revisions(apps, ns) == {"3": "server:3", "4": "server:4"}
    apps.patch_namespaced_deployment("web", ns, {"spec": {"revisionHistoryLimit": 0}})
    assert _revisions(apps, ns) == {"4": "server:4"}


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not on PATH")
def test_a_paused_deployment_reports_it_and_resuming_restarts_the_deadline(apps, ns, ks):
    apps.create_namespaced_deployment(ns, deployment("web", replicas=1))
    assert _kubectl(ks, "set", "image", "deployment/web", "main=server:2", "-n", ns).returncode == 0
    assert _kubectl(ks, "rollout", "pause", "deployment/web", "-n", ns).returncode == 0
    assert _conditions(apps, ns, "web")["Progressing"] == ("Unknown", "DeploymentPaused")
    assert _kubectl(ks, "set", "image", "deployment/web", "main=server:3", "-n", ns).returncode == 0
    assert _revisions(apps, ns) == {"1": "server:1", "2": "server:2"}  # nothing rolls while paused
    refused = _kubectl(ks, "rollout", "undo", "deployment/web", "-n", ns)
    assert refused.returncode != 0 and "you cannot rollback a paused deployment" in refused.stderr
    ks.advance(700)  # longer than the deadline: a paused Deployment does not time out
    assert _conditions(apps, ns, "web")["Progressing"] == ("Unknown", "DeploymentPaused")
    assert _kubectl(ks, "rollout", "resume", "deployment/web", "-n", ns).returncode == 0
    assert _revisions(apps, ns) == {"1": "server:1", "2": "server:2", "3": "server:3"}
    assert _conditions(apps, ns, "web")["Progressing"] == ("True", "NewReplicaSetAvailable")
