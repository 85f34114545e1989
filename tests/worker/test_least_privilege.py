"""Least privilege, proven: kubesim enforces RBAC with deploy/'s ClusterRoles and bindings applied, the worker and the
watcher run with their service accounts' tokens (a kubeconfig each, as in the cluster) through a reconcile that creates,
repairs and prunes every kind it owns (KAI Scheduler's Queues and the PriorityClasses of a KAI pool too), submit ->
admitted -> running -> finished, half a card on the KAI pool (its Job) and a gang there (its PodGroup and pods, adopted
on a retry, made again by a repair, deleted at the stop),
a queue position, a log tail, a retried submit adopting its Job and Service, and a stop; an inference service
submitted (a Deployment and its Service), scaled by a patch, followed by the watcher and stopped, and a two-pod one as a
LeaderWorkerSet; then work submitted outside the portal, one object of each kind kubesim runs under Kueue, whose owner
the watcher reads and the worker deletes. No call may be forbidden, and every rule the ClusterRoles grant must have been
used: a verb the code no longer needs fails the test as surely as a missing one. The owner verbs of a kind kubesim does
not run yet are the only ones left out. The watcher's and beat's leader election, each with its own account, creates,
renews and releases its Lease through the Roles in the portal's namespace."""

import threading
from decimal import Decimal
from pathlib import Path

import pytest
import yaml
from django.contrib.auth import get_user_model
from kubernetes import client as k8s

from apps.core.kueue_names import MANAGED_BY, MANAGED_BY_LABEL, POD_GROUP_LABEL, PROJECT_LABEL
from apps.org import services as org_services
from apps.org.demo import seed_demo
from apps.org.models import Department, NodePool, Project
from apps.workloads import services
from apps.workloads.models import LIVE_STATUSES, Kind, Origin, Status, Workload
from kubesim.testing import serve
from tests.kubesim.conftest import jobset_body, pytorch_replica, pytorchjob_body, replicated_job, trainjob_body
from tests.kubesim.ray import raycluster_body, rayjob_body, worker_group
from tests.worker.conftest import wait_for
from tests.worker.test_leader import TIMING
from tests.worker.test_watcher_outside import batch_job
from worker import tasks
from worker.cluster_check import KUEUE_CONFIG_KEY, KUEUE_NAMESPACE
from worker.gateway import Gateway, api_client_from_settings, reset_gateway
from worker.kueue_sync import KIND_ORDER
from worker.leader import LEASES, LeaderElector
from worker.manifests import (
    inference_deployment,
    inference_leaderworkerset,
    inference_service,
    job_manifest,
    kai_gang_pod,
    kai_gang_pod_group,
    notebook_service,
)
from worker.outside_work import OWNER_KINDS
from worker.permissions import OWNER_READ, OWNER_STOP, POD_GROUP_STOP
from worker.watcher import Watcher

pytestmark = pytest.mark.slow

BASE = Path(__file__).resolve().parents[2] / "deploy" / "base"
KUEUE_API = ("kueue.x-k8s.io", "v1beta2")
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
            if obj["kind"] in ("ServiceAccount", "Role", "RoleBinding"):  # kustomize sets the base's namespace
                obj["metadata"]["namespace"] = PORTAL_NAMESPACE
            ks.apply(obj)
    kubeconfigs = {name: ks.write_kubeconfig(str(tmp_path / name), ks.service_account_token(PORTAL_NAMESPACE, name))
                   for name in ("gpu-portal-watcher", "gpu-portal-worker", "gpu-portal-beat")}
    settings.KUBECONFIG = kubeconfigs["gpu-portal-beat"]
    beat_client = api_client_from_settings()
    settings.KUBECONFIG = kubeconfigs["gpu-portal-watcher"]  # the watcher process's settings
    watcher_client = api_client_from_settings()
    watcher_gw = Gateway(api_client_from_settings())
    settings.KUBECONFIG = kubeconfigs["gpu-portal-worker"]
    reset_gateway(None)  # the worker's tasks build their gateway from settings.KUBECONFIG
    admin = Gateway(ks.api_client())
    ks.clear_rbac_records()
    yield admin, watcher_gw, {"watcher": watcher_client, "beat": beat_client}
    reset_gateway(None)


def leases_held_and_released(election_clients):
    """Each process kind's leader election with its own account: its Lease created, renewed, then released."""
    for process, api_client in election_clients.items():
        lease_held_and_released(LeaderElector(api_client, namespace=PORTAL_NAMESPACE, name=LEASES[process],
                                              timing=TIMING))


def lease_held_and_released(elector):
    stopped = threading.Event()
    thread = threading.Thread(target=elector.run, kwargs={"on_started_leading": lambda: None,
                                                          "on_stopped_leading": lambda lost: stopped.set()})
    thread.start()
    wait_for(elector.is_leader, timeout=5)
    acquired = elector.leading_until
    wait_for(lambda: elector.leading_until > acquired, timeout=5)  # renewed
    elector.stop()
    thread.join(10)
    assert stopped.is_set() and not thread.is_alive()


def drift(admin):
    """What a reconcile repairs and prunes: per kind it owns, one object changed behind its back and one copy it
    does not want (both carry the portal's ownership label)."""
    for kind in KIND_ORDER:
        current = admin.list(kind, label_selector=f"{MANAGED_BY_LABEL}={MANAGED_BY}")[0]
        metadata = current["metadata"]
        changed = {**current, "metadata": {**metadata}}
        if kind == "WorkloadPriorityClass":
            changed["value"] = current["value"] + 1
        elif kind == "PriorityClass":  # its value is immutable; its description is not
            changed["description"] = "drifted"
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


def inference_served(enforcing, user):
    """An inference service on a serving pool of one node: its Deployment and Service created (and adopted again on
    a retry), running once the watcher sees a ready replica, scaled by a patch, then stopped by deleting the
    Deployment; then a two-pod one's LeaderWorkerSet the same way, rolled to a new image."""
    admin_user = get_user_model().objects.get(username="admin")
    core = k8s.CoreV1Api(enforcing.api_client())
    node = core.create_node({"metadata": {"name": "serve-node-0", "labels": {"portal.gpu/pool": "serve"}}})
    node.status = {"allocatable": {"nvidia.com/gpu": "4", "cpu": "32", "memory": "256Gi", "pods": "110"},
                   "capacity": {"nvidia.com/gpu": "4", "cpu": "32", "memory": "256Gi", "pods": "110"},
                   "conditions": [{"type": "Ready", "status": "True"}]}
    core.replace_node_status("serve-node-0", node)
    pool = org_services.node_pool_create(actor=admin_user, slug="serve", name="Serving", gpu_resource="nvidia.com/gpu",
                                         capacity=4, serving=True, node_labels={"portal.gpu/pool": "serve"})
    vision = Project.objects.get(slug="vision")
    org_services.serving_reservation_create(actor=admin_user, project=vision, node_pool=pool, cards=4)
    service = services.inference_submit(actor=user, project=vision, node_pool=pool, name="llm", gpus=1, replicas=1,
                                        image="vllm/vllm-openai", model_label="llm", data_class="public")
    assert tasks.workload_submit.apply(args=[service.pk]).get() == "submitted"
    service = Workload.objects.get(pk=service.pk)
    # A retried submit finds the Deployment and its Service there and adopts them.
    deployments = f"/apis/apps/v1/namespaces/{vision.namespace}/deployments"
    assert tasks._create_or_adopt_in(tasks.gateway(), deployments, inference_deployment(service)) == service.k8s_uid
    tasks._create_or_adopt(tasks.gateway(), inference_service(service, service.k8s_uid))
    enforcing.advance(1)
    wait_for(lambda: status_of(service) == Status.RUNNING, describe=lambda: status_of(service))
    services.inference_update(actor=user, workload=Workload.objects.get(pk=service.pk), replicas=2)
    assert tasks.inference_patch.apply(args=[service.pk]).get() == "patched"
    enforcing.advance(1)
    wait_for(lambda: Workload.objects.get(pk=service.pk).ready_replicas == 2)
    services.workload_stop(actor=user, workload=Workload.objects.get(pk=service.pk))
    assert tasks.workload_stop.apply(args=[service.pk]).get() == "stopped"
    wait_for(lambda: status_of(service) == Status.STOPPED)
    # A two-pod replica: a LeaderWorkerSet, created (and adopted on a retry), rolled to a new image, stopped.
    group = services.inference_submit(actor=user, project=vision, node_pool=pool, name="big", gpus=1, pods=2,
                                      image="vllm/vllm-openai", model_label="llm", data_class="public")
    assert tasks.workload_submit.apply(args=[group.pk]).get() == "submitted"
    group = Workload.objects.get(pk=group.pk)
    sets = f"/apis/leaderworkerset.x-k8s.io/v1/namespaces/{vision.namespace}/leaderworkersets"
    assert tasks._create_or_adopt_in(tasks.gateway(), sets, inference_leaderworkerset(group)) == group.k8s_uid
    enforcing.advance(1)
    wait_for(lambda: status_of(group) == Status.RUNNING, describe=lambda: status_of(group))
    services.inference_update(actor=user, workload=Workload.objects.get(pk=group.pk), image="vllm/vllm-openai:v2")
    assert tasks.inference_patch.apply(args=[group.pk]).get() == "patched"
    services.workload_stop(actor=user, workload=Workload.objects.get(pk=group.pk))
    assert tasks.workload_stop.apply(args=[group.pk]).get() == "stopped"
    wait_for(lambda: status_of(group) == Status.STOPPED)


def status_of(workload):
    return Workload.objects.get(pk=workload.pk).status


# One object per Kueue framework, as a user would `kubectl apply` it into Vision's queue (1 GPU).
OUTSIDE_OBJECTS = {
    "batch/job": lambda name: batch_job(name, queue="elastic-h100", pods=1, gpus=1),
    "jobset.x-k8s.io/jobset": lambda name: {**(body := jobset_body(name, replicated_job(
        "main", requests={"nvidia.com/gpu": "1"}), labels={"kueue.x-k8s.io/queue-name": "elastic-h100"})),
        "metadata": {**body["metadata"], "namespace": "proj-vision"}},
    "kubeflow.org/pytorchjob": lambda name: pytorchjob_body(name, master=pytorch_replica(
        1, requests={"nvidia.com/gpu": "1"}), labels={"kueue.x-k8s.io/queue-name": "elastic-h100"}),
    "ray.io/rayjob": lambda name: rayjob_body(name, worker_group("gpu", 1, {"nvidia.com/gpu": "1"}),
                                              labels={"kueue.x-k8s.io/queue-name": "elastic-h100"}),
    "ray.io/raycluster": lambda name: raycluster_body(name, worker_group("gpu", 1, {"nvidia.com/gpu": "1"}),
                                                      labels={"kueue.x-k8s.io/queue-name": "elastic-h100"}),
    "trainer.kubeflow.org/trainjob": lambda name: trainjob_body(
        name, labels={"kueue.x-k8s.io/queue-name": "elastic-h100"}, numNodes=1,
        resourcesPerNode={"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}),
    # A plain pod's Workload is owned by the pod; an LWS group's by the LeaderWorkerSet.
    "pod": lambda name: {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": name, "labels": {"kueue.x-k8s.io/queue-name": "elastic-h100"}}, "spec": one_gpu_pod_spec()},
    "leaderworkerset.x-k8s.io/leaderworkerset": lambda name: {
        "apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
        "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": "elastic-h100"}},
        "spec": {"replicas": 1, "leaderWorkerTemplate": {"size": 1, "workerTemplate": {"spec": one_gpu_pod_spec()}}}},
}


def one_gpu_pod_spec():
    return {"restartPolicy": "Never", "containers": [{
        "name": "main", "image": "pytorch/pytorch:2.4.0", "command": ["sleep", "600"],
        "resources": {"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}}]}


def frameworks_run(enforcing):
    """The Kueue integrations this kubesim runs (its kueue-manager-config, as on a real cluster)."""
    config_map = k8s.CoreV1Api(enforcing.api_client()).read_namespaced_config_map("kueue-manager-config",
                                                                                  KUEUE_NAMESPACE)
    return set(yaml.safe_load(config_map.data[KUEUE_CONFIG_KEY])["integrations"]["frameworks"])


def outside_work_read_and_stopped(enforcing, watcher_gw):
    """Per kind kubesim runs: an object submitted outside the portal (and a pod group), mirrored (the watcher read its
    owner), read again by a restarted watcher's first sync (one list of each kind), then stopped through the portal:
    the stop task's foreground delete of the owner with the worker's account (a pod group's: one delete of its pods)."""
    run = [(group, owner) for (group, _), owner in OWNER_KINDS.items() if owner.framework in frameworks_run(enforcing)]
    missing = [owner.framework for _, owner in run if owner.framework not in OUTSIDE_OBJECTS]
    assert not missing, f"kubesim runs {missing}: give the scenario an object of each"
    admin = k8s.CustomObjectsApi(enforcing.api_client())
    core = k8s.CoreV1Api(enforcing.api_client())
    stopper = get_user_model().objects.get(username="admin")

    def mirrored(object_name, framework):
        enforcing.advance(1)
        return wait_for(lambda: Workload.objects.filter(origin=Origin.OUTSIDE, object_name=object_name).first(),
                        describe=lambda: f"no mirrored {framework}; Kueue's: " + repr(
                            [(w["metadata"]["name"], w["metadata"].get("ownerReferences")) for w in
                             admin.list_namespaced_custom_object(*KUEUE_API, "proj-vision", "workloads")["items"]]))

    rows = []
    for group, owner in run:
        body = OUTSIDE_OBJECTS[owner.framework](f"outside-{owner.plural}")
        version = body["apiVersion"].rpartition("/")[2]
        if group:
            admin.create_namespaced_custom_object(group, version, "proj-vision", owner.plural, body)
        else:
            core.create_namespaced_pod("proj-vision", body)
        rows.append(mirrored(body["metadata"]["name"], owner.framework))
        if owner.framework == "pod":  # a pod group's Workload is owned by its pods, named after the group
            for index in range(2):
                member = OUTSIDE_OBJECTS["pod"](f"outside-group-{index}")
                member["metadata"]["labels"][POD_GROUP_LABEL] = "outside-group"
                member["metadata"]["annotations"] = {"kueue.x-k8s.io/pod-group-total-count": "2"}
                core.create_namespaced_pod("proj-vision", member)
            rows.append(mirrored("outside-group", "pod group"))
    Watcher(watcher_gw, resync_seconds=3600).resync()  # a first sync reads the owners it lacks a kind at a time
    for row in rows:
        services.workload_stop(actor=stopper, workload=row)
        assert tasks.workload_stop.apply(args=[row.pk]).get() == "stopped"
    enforcing.advance(1)
    wait_for(lambda: not Workload.objects.filter(origin=Origin.OUTSIDE, status__in=LIVE_STATUSES).exists())
    return {framework for framework in (owner.framework for owner in OWNER_KINDS.values())
            if framework not in {owner.framework for _, owner in run}}


def owner_rules_of(frameworks):
    """The ClusterRoles' owner-kind rules of the given frameworks: the watcher's read, the worker's stop."""
    rules = set()
    for (group, _), owner in OWNER_KINDS.items():
        if owner.framework in frameworks:
            stop = (*OWNER_STOP, *POD_GROUP_STOP) if owner.plural == "pods" else OWNER_STOP
            rules |= {("ClusterRole/gpu-portal-watcher", group, owner.plural, verb) for verb in OWNER_READ}
            rules |= {("ClusterRole/gpu-portal-worker", group, owner.plural, verb) for verb in stop}
    return rules


def kai_pool():
    """A pool KAI Scheduler schedules, with a department's and a project's quota: the reconcile writes KAI Queues."""
    admin_user = get_user_model().objects.get(username="admin")
    pool = org_services.node_pool_create(actor=admin_user, slug="rtx", name="RTX", gpu_resource="nvidia.com/gpu",
                                         capacity=4, scheduler="kai", gpu_fractions=True)
    org_services.quota_set(actor=admin_user, node_pool=pool, department=Department.objects.get(slug="research"),
                           deserved=4, limit=None)
    org_services.quota_set(actor=admin_user, node_pool=pool, project=Project.objects.get(slug="vision"), deserved=2,
                           limit=4)


def on_kai_pool(user):
    """Half a card on the KAI pool (its Job: KAI's grouper makes its PodGroup), and a gang of two there: its PodGroup
    and pods created, both adopted again on a retry, a rank deleted and made again by the gang's repair (the pool has
    no nodes here: both wait)."""
    rtx, vision = NodePool.objects.get(slug="rtx"), Project.objects.get(slug="vision")
    half = services.workload_submit(
        actor=user, project=vision, kind=Kind.NOTEBOOK, name="half", image="jupyter/base-notebook:latest",
        node_pool=rtx, gpus=0, gpu_fraction=Decimal("0.5"), model_label="m", data_class="public", preemptible=True)
    assert tasks.workload_submit.apply(args=[half.pk]).get() == "submitted"
    gang = services.workload_submit(
        actor=user, project=vision, kind=Kind.TRAINING, name="gang", image="pytorch/pytorch:2.4.0",
        command=["sleep", "600"], node_pool=rtx, gpus=1, pods=2, model_label="m", data_class="public",
        preemptible=True)
    assert tasks.workload_submit.apply(args=[gang.pk]).get() == "submitted"
    gang = Workload.objects.get(pk=gang.pk)
    gw = tasks.gateway()
    assert tasks._create_or_adopt(gw, kai_gang_pod_group(gang)) == gang.k8s_uid
    tasks._create_or_adopt(gw, kai_gang_pod(gang, 0))
    gw.delete("Pod", f"{gang.job_name}-1", namespace=vision.namespace)
    assert tasks.kai_gang_repair.apply(args=[gang.pk]).get() in ("made 1", "waiting")
    return Workload.objects.get(pk=half.pk), gang


def test_the_cluster_roles_hold_what_a_run_uses_and_nothing_more(enforcing, accounts, transactional_db):
    admin, watcher_gw, election_clients = accounts
    seed_demo()
    kai_pool()
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
        half, gang = on_kai_pool(alice)
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
        for kai_work in (half, gang):
            services.workload_stop(actor=alice, workload=Workload.objects.get(pk=kai_work.pk))
            assert tasks.workload_stop.apply(args=[kai_work.pk]).get() == "stopped"
        wait_for(lambda: status_of(waiting) == Status.STOPPED)
        inference_served(enforcing, alice)
        not_run = outside_work_read_and_stopped(enforcing, watcher_gw)
    finally:
        watcher.stop()
    leases_held_and_released(election_clients)

    report = enforcing.rbac()
    assert report["enabled"] and report["denials"] == []
    used = {(g["role"], g["group"], g["resource"], g["verb"]) for g in report["grants"]}
    granted = set()
    for obj in yaml.safe_load_all((BASE / "rbac.yaml").read_text()):
        role = {"ClusterRole": f"ClusterRole/{obj['metadata']['name']}",
                "Role": f"Role/{PORTAL_NAMESPACE}/{obj['metadata']['name']}"}.get(obj["kind"])
        if role:
            granted |= {(role, group, resource, verb) for rule in obj["rules"]
                        for group in rule["apiGroups"] for resource in rule["resources"] for verb in rule["verbs"]}
    # Granted but never used: drop it from worker/permissions.py and deploy/ (the owner rules of a kind kubesim does
    # not run yet excepted: the scenario uses them as soon as kubesim runs the kind).
    assert sorted(granted - used - owner_rules_of(not_run)) == []
    assert used <= granted
