"""Data, credentials, notebooks and distributed training through the whole path: pages -> the real Celery worker ->
kubesim, which validates every manifest strictly against the schemas it serves
(kubesim.apiserver.registry.workloadschemas); the official client's models check the field names once more
(tests.k8s_fields)."""

from __future__ import annotations

import base64
import json
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from apps.org import services as org_services
from apps.org.models import DataSource, ImagePullSecret
from apps.workloads import notebooks, services
from apps.workloads.models import Credential, Kind, Status, Workload, WorkloadEvent
from tests.apps.workloads.helpers import submit_payload
from tests.k8s_fields import unknown_fields
from tests.worker.conftest import kueue_workload, signed_in, wait_for
from worker import tasks

pytestmark = pytest.mark.slow

WANDB_KEY = "wandb-value-7f3a9c1e5b"
REGISTRY_PASSWORD = "registry-password-2b8d4f6a"


@pytest.fixture
def alice(org):
    return signed_in(org["alice"])


@pytest.fixture
def attachments(org, cluster):
    """The vision project's data (an existing PVC and an NFS export) and registry, and alice's W&B key, written into
    the cluster by the worker tasks."""
    admin, alice = org["admin"], org["alice"]
    from apps.org.models import Project

    vision = Project.objects.get(slug="vision")
    cluster.create({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {
        "name": "imagenet-pvc", "namespace": "proj-vision"}, "spec": {
        "accessModes": ["ReadOnlyMany"], "resources": {"requests": {"storage": "100Gi"}}}})
    pvc = org_services.data_source_create(actor=admin, project=vision, name="imagenet", kind=DataSource.Kind.PVC,
                                          claim_name="imagenet-pvc", mount_path="/data/imagenet")
    nfs = org_services.data_source_create(actor=admin, project=vision, name="scratch", kind=DataSource.Kind.NFS,
                                          nfs_server="nfs.example.org", nfs_path="/exports/scratch",
                                          mount_path="/mnt/scratch", read_only=False)
    registry = org_services.pull_secret_create(actor=admin, project=vision, name="nvcr", registry="nvcr.io",
                                               username="$oauthtoken", password=REGISTRY_PASSWORD)
    credential = services.credential_create(actor=alice, project=vision, name="wandb",
                                            values={"WANDB_API_KEY": WANDB_KEY})
    assert tasks.pull_secret_sync.apply(args=[registry.pk]).get() == "applied"
    assert tasks.credential_sync.apply(args=[credential.pk]).get() == "applied"
    return {"pvc": pvc, "nfs": nfs, "registry": ImagePullSecret.objects.get(pk=registry.pk),
            "credential": Credential.objects.get(pk=credential.pk)}


def test_a_job_mounts_data_reads_credentials_by_reference_and_pulls_with_the_projects_secret(
        alice, attachments, cluster, kubesim, celery_worker, watcher):
    credential = attachments["credential"]
    assert credential.sealed == "" and credential.applied_at  # the values are gone from the portal once written
    secret = cluster.get("Secret", credential.secret_name, namespace="proj-vision")
    assert base64.b64decode(secret["data"]["WANDB_API_KEY"]).decode() == WANDB_KEY
    pull = cluster.get("Secret", attachments["registry"].secret_name, namespace="proj-vision")
    assert pull["type"] == "kubernetes.io/dockerconfigjson"
    auths = json.loads(base64.b64decode(pull["data"][".dockerconfigjson"]))["auths"]
    assert auths["nvcr.io"]["password"] == REGISTRY_PASSWORD

    payload = submit_payload("training", command="sleep 600", memory_gib="32", shm_gib="8",
                             data_sources=[attachments["pvc"].pk, attachments["nfs"].pk],
                             credentials=[credential.pk])
    response = alice.post(reverse("workloads:submit", args=["training"]), payload)
    assert response.status_code == 302, response.content.decode()[:2000]
    workload = Workload.objects.get()
    wait_for(lambda: Workload.objects.get(pk=workload.pk).k8s_uid, describe=lambda: Workload.objects.get(
        pk=workload.pk).status_message)
    job = cluster.get("Job", workload.job_name, namespace="proj-vision")  # kubesim accepted it under Strict
    assert unknown_fields({k: v for k, v in job.items() if k != "status"}, "V1Job") == []
    pod_spec = job["spec"]["template"]["spec"]
    assert pod_spec["imagePullSecrets"] == [{"name": attachments["registry"].secret_name}]
    volumes = {volume["name"]: volume for volume in pod_spec["volumes"]}
    assert volumes["data-imagenet"]["persistentVolumeClaim"] == {"claimName": "imagenet-pvc", "readOnly": True}
    assert volumes["data-scratch"]["nfs"] == {"server": "nfs.example.org", "path": "/exports/scratch",
                                              "readOnly": False}
    assert volumes["dshm"]["emptyDir"] == {"medium": "Memory", "sizeLimit": "8192Mi"}
    container = pod_spec["containers"][0]
    assert {m["mountPath"]: m.get("readOnly", False) for m in container["volumeMounts"]} == {
        "/data/imagenet": True, "/mnt/scratch": False, "/dev/shm": False}
    assert container["envFrom"] == [{"secretRef": {"name": credential.secret_name}}]
    assert WANDB_KEY not in json.dumps(job) and REGISTRY_PASSWORD not in json.dumps(job)
    kubesim.advance(1)
    wait_for(lambda: Workload.objects.get(pk=workload.pk).status == Status.RUNNING)
    pods = cluster.list("Pod", namespace="proj-vision", label_selector=f"portal.gpu/workload-id={workload.pk}")
    assert [p["status"]["phase"] for p in pods] == ["Running"]


@pytest.mark.parametrize("expose", ["ingress", "httproute"])
def test_a_notebook_is_published_with_its_token_in_a_secret(org, cluster, kubesim, settings, expose):
    settings.NOTEBOOK_EXPOSE, settings.NOTEBOOK_BASE_DOMAIN = expose, "nb.example.org"
    settings.NOTEBOOK_INGRESS_CLASS, settings.NOTEBOOK_TLS_SECRET = "nginx", "wildcard-nb"
    settings.NOTEBOOK_GATEWAY = "gateways/public"
    response = signed_in(org["alice"]).post(reverse("workloads:submit", args=["notebook"]),
                                            submit_payload("notebook", pool="l40s-shared"))
    assert response.status_code == 302
    notebook = Workload.objects.get(kind=Kind.NOTEBOOK)
    assert tasks.workload_submit.apply(args=[notebook.pk]).get() == "submitted"
    job = cluster.get("Job", notebook.job_name, namespace="proj-vision")
    container = job["spec"]["template"]["spec"]["containers"][0]
    token_env = next(e for e in container["env"] if e["name"] == "JUPYTER_TOKEN")
    assert token_env == {"name": "JUPYTER_TOKEN", "valueFrom": {"secretKeyRef": {
        "name": notebooks.token_secret_name(notebook.pk), "key": "token"}}}
    assert notebooks.token(notebook.pk) not in json.dumps(job)  # only the Secret holds it
    secret = cluster.get("Secret", notebooks.token_secret_name(notebook.pk), namespace="proj-vision")
    assert base64.b64decode(secret["data"]["token"]).decode() == notebooks.token(notebook.pk)
    assert secret["metadata"]["ownerReferences"][0]["uid"] == job["metadata"]["uid"]
    host = f"{notebook.job_name}.nb.example.org"
    if expose == "ingress":
        ingress = cluster.get("Ingress", notebook.job_name, namespace="proj-vision")
        assert unknown_fields({k: v for k, v in ingress.items() if k != "status"}, "V1Ingress") == []
        assert ingress["spec"]["ingressClassName"] == "nginx"
        assert ingress["spec"]["tls"] == [{"hosts": [host], "secretName": "wildcard-nb"}]
        rule = ingress["spec"]["rules"][0]
        assert rule["host"] == host
        assert rule["http"]["paths"][0]["backend"]["service"] == {"name": notebook.job_name, "port": {"name": "http"}}
    else:
        route = cluster.get("HTTPRoute", notebook.job_name, namespace="proj-vision")
        assert route["spec"]["parentRefs"] == [{"name": "public", "namespace": "gateways"}]
        assert route["spec"]["hostnames"] == [host]
        assert route["spec"]["rules"][0]["backendRefs"] == [{"name": notebook.job_name, "port": 80}]
    # Connect sends the owner to the published address with the token; nobody else gets anything.
    connect = reverse("workloads:connect", args=[notebook.pk])
    Workload.objects.filter(pk=notebook.pk).update(status=Status.RUNNING)
    answer = signed_in(org["alice"]).get(connect)
    assert answer.status_code == 302
    assert answer["Location"] == f"https://{host}/lab?token={notebooks.token(notebook.pk)}"
    assert signed_in(org["bob"]).get(connect).status_code == 404


def test_four_pods_find_each_other_and_start_only_together(org, cluster, kubesim, watcher):
    alice = signed_in(org["alice"])
    # vision may hold 8 H100 units: a 1-GPU job first, so a gang of 4 x 2 GPUs (8 units) cannot fit beside it.
    blocker_post = alice.post(reverse("workloads:submit", args=["training"]),
                              submit_payload("training", name="blocker", command="sleep 3600"))
    assert blocker_post.status_code == 302
    blocker = Workload.objects.get(name="blocker")
    assert tasks.workload_submit.apply(args=[blocker.pk]).get() == "submitted"
    kubesim.advance(1)
    wait_for(lambda: Workload.objects.get(pk=blocker.pk).status == Status.RUNNING)
    response = alice.post(reverse("workloads:submit", args=["training"]),
                          submit_payload("training", name="gang", gpus="2", pods="4", command="sleep 3600"))
    assert response.status_code == 302
    gang = Workload.objects.get(name="gang")
    assert tasks.workload_submit.apply(args=[gang.pk]).get() == "submitted"
    job = cluster.get("Job", gang.job_name, namespace="proj-vision")
    assert job["spec"]["completionMode"] == "Indexed"
    assert job["spec"]["template"]["spec"]["subdomain"] == gang.job_name
    service = cluster.get("Service", gang.job_name, namespace="proj-vision")
    assert service["spec"]["clusterIP"] == "None" and service["spec"]["publishNotReadyAddresses"] is True
    assert unknown_fields({k: v for k, v in service.items() if k != "status"}, "V1Service") == []
    kubesim.advance(1)
    assert not cluster.list("Pod", namespace="proj-vision", label_selector=f"portal.gpu/workload-id={gang.pk}")
    gang.refresh_from_db()
    assert kueue_workload(cluster, gang)["status"].get("admission") is None  # all four, or none
    assert Workload.objects.get(pk=gang.pk).status == Status.QUEUED
    services.workload_stop(actor=org["alice"], workload=blocker)
    assert tasks.workload_stop.apply(args=[blocker.pk]).get() == "stopped"
    kubesim.advance(1)
    wait_for(lambda: Workload.objects.get(pk=gang.pk).status == Status.RUNNING)
    pods = cluster.list("Pod", namespace="proj-vision", label_selector=f"portal.gpu/workload-id={gang.pk}")
    assert len(pods) == 4
    ranks = {}
    for pod in pods:
        container = pod["spec"]["containers"][0]
        env = {e["name"]: e for e in container["env"]}
        assert env["MASTER_ADDR"]["value"] == f"{gang.job_name}-0.{gang.job_name}"
        assert (env["MASTER_PORT"]["value"], env["WORLD_SIZE"]["value"], env["NNODES"]["value"],
                env["NPROC_PER_NODE"]["value"]) == ("29500", "4", "4", "2")
        field_path = env["RANK"]["valueFrom"]["fieldRef"]["fieldPath"]
        assert field_path == "metadata.annotations['batch.kubernetes.io/job-completion-index']"
        rank = pod["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"]
        ranks[rank] = pod
        assert pod["spec"]["hostname"] == f"{gang.job_name}-{rank}" and pod["spec"]["subdomain"] == gang.job_name
    assert sorted(ranks) == ["0", "1", "2", "3"]
    endpoints = cluster.get("Endpoints", gang.job_name, namespace="proj-vision")
    resolved = {address["hostname"]: address["ip"] for address in endpoints["subsets"][0]["addresses"]}
    assert resolved == {f"{gang.job_name}-{rank}": pod["status"]["podIP"] for rank, pod in ranks.items()}
    master = env["MASTER_ADDR"]["value"].split(".")[0]
    assert resolved[master] == ranks["0"]["status"]["podIP"]  # MASTER_ADDR reaches rank 0


def test_idle_culling_reads_the_notebook_servers_own_activity(org, cluster, kubesim, watcher):
    response = signed_in(org["alice"]).post(reverse("workloads:submit", args=["notebook"]), submit_payload(
        "notebook", pool="l40s-shared", notebook_idle_timeout_minutes="30"))
    assert response.status_code == 302
    notebook = Workload.objects.get(kind=Kind.NOTEBOOK)
    assert tasks.workload_submit.apply(args=[notebook.pk]).get() == "submitted"
    kubesim.advance(1)
    wait_for(lambda: Workload.objects.get(pk=notebook.pk).status == Status.RUNNING)
    kubesim.advance(24 * 3600)  # kubesim's notebooks serve until they are stopped
    assert Workload.objects.get(pk=notebook.pk).status == Status.RUNNING
    assert tasks.notebooks_cull_idle.apply().get() == 0
    away = timezone.now() - timedelta(minutes=31)
    Workload.objects.filter(pk=notebook.pk).update(last_activity_at=away)
    # Someone works in the notebook: the server says so, and the culler leaves it running.
    pod = cluster.list("Pod", namespace="proj-vision", label_selector=f"portal.gpu/workload-id={notebook.pk}")[0]
    kubesim.advance(60)
    kubesim.report_activity("proj-vision", pod["metadata"]["name"])
    assert tasks.notebooks_cull_idle.apply().get() == 0
    assert Workload.objects.get(pk=notebook.pk).server_activity_at > away
    # Then nothing for 31 minutes: stopped, and the event says why.
    Workload.objects.filter(pk=notebook.pk).update(server_activity_at=away)
    assert tasks.notebooks_cull_idle.apply().get() == 1
    stopping = Workload.objects.get(pk=notebook.pk)
    assert stopping.status == Status.STOPPING and stopping.status_reason == "IdleTimeout"
    event = WorkloadEvent.objects.filter(workload=notebook, reason="IdleTimeout").get()
    assert event.message.startswith("Stopped after 30 minutes without activity")
