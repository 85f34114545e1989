"""An inference service's endpoint published by an Ingress or a Gateway API HTTPRoute (INFERENCE_EXPOSE): the worker
creates the route beside the Deployment's Service (kubesim checks it with fieldValidation=Strict against the kind's
schema), owned by the Deployment; the service's page points at the published address and the portal's relay is off.
With RBAC enforced, the worker's account creates the route through deploy/notebook-routes/ and nothing more, and
without that ClusterRole it may not: the submission is rejected and its Deployment taken back."""

import json
from pathlib import Path

import jsonschema
import pytest
import yaml
from django.urls import reverse

from apps.org.models import Project
from apps.workloads import services
from apps.workloads.models import Status, Workload
from kubesim.testing import serve
from tests.crd_schemas import strict_schema
from tests.k8s_fields import unknown_fields
from tests.worker.conftest import serving_pool, signed_in
from worker import tasks
from worker.gateway import Gateway, reset_gateway

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
PORTAL_NAMESPACE = "gpu-portal"
# Gateway API's own HTTPRoute schema (tests/worker/gateway_api/SOURCES.md), strict as fieldValidation=Strict is.
HTTP_ROUTE_SCHEMA = strict_schema(json.loads((Path(__file__).parent / "gateway_api" / "httproutes.v1.json")
                                             .read_text()))
HTTP_ROUTE_SCHEMA["properties"]["metadata"] = {"type": "object"}  # the API server checks metadata itself


def http_route_errors(route: dict) -> list[str]:
    return [f"{'.'.join(map(str, e.path))}: {e.message}" for e in jsonschema.Draft7Validator(
        HTTP_ROUTE_SCHEMA).iter_errors({k: v for k, v in route.items() if k != "status"})]


@pytest.fixture
def published(settings):
    def configure(expose: str) -> None:
        settings.INFERENCE_EXPOSE, settings.INFERENCE_BASE_DOMAIN = expose, "models.example.org"
        settings.INFERENCE_TLS_SECRET, settings.NOTEBOOK_INGRESS_CLASS = "wildcard-models", "nginx"
        settings.NOTEBOOK_GATEWAY = "gateways/public"
    return configure


def submit(user, pool) -> Workload:
    workload = services.inference_submit(
        actor=user, project=Project.objects.get(slug="vision"), node_pool=pool, name="llama",
        image="vllm/vllm-openai:v0.6.3", gpus=1, model_label="llama-3-8b", data_class="public", serving_port=8080)
    assert tasks.workload_submit.apply(args=[workload.pk]).get() == "submitted"
    return Workload.objects.get(pk=workload.pk)


@pytest.mark.parametrize("expose", ["ingress", "httproute"])
def test_the_route_publishes_the_service_and_goes_with_its_deployment(kubesim, cluster, org, published, expose):
    published(expose)
    workload = submit(org["alice"], serving_pool(kubesim, org, cards=2))
    name, host = workload.job_name, f"{workload.job_name}.models.example.org"
    deployment = cluster.get("Deployment", name, namespace="proj-vision")
    owner = [{"apiVersion": "apps/v1", "kind": "Deployment", "name": name, "uid": deployment["metadata"]["uid"],
              "controller": True, "blockOwnerDeletion": True}]
    if expose == "ingress":
        route = cluster.get("Ingress", name, namespace="proj-vision")
        assert unknown_fields({k: v for k, v in route.items() if k != "status"}, "V1Ingress") == []
        assert route["spec"] == {
            "ingressClassName": "nginx", "tls": [{"hosts": [host], "secretName": "wildcard-models"}],
            "rules": [{"host": host, "http": {"paths": [{"path": "/", "pathType": "Prefix", "backend": {
                "service": {"name": name, "port": {"name": "http"}}}}]}}]}
    else:
        route = cluster.get("HTTPRoute", name, namespace="proj-vision")
        assert http_route_errors(route) == []
        assert route["spec"]["parentRefs"] == [{"name": "public", "namespace": "gateways"}]
        assert route["spec"]["hostnames"] == [host]
        assert route["spec"]["rules"][0]["backendRefs"] == [{"name": name, "port": 80}]
    assert route["metadata"]["ownerReferences"] == owner
    assert route["metadata"]["labels"]["portal.gpu/workload-id"] == str(workload.pk)
    # A retried submit adopts what is there.
    Workload.objects.filter(pk=workload.pk).update(status=Status.SUBMITTING, k8s_uid="")
    assert tasks.workload_submit.apply(args=[workload.pk]).get() == "submitted"
    # The page points the project's members at the published address; the portal relays nothing.
    Workload.objects.filter(pk=workload.pk).update(status=Status.RUNNING)
    detail = signed_in(org["alice"]).get(reverse("workloads:detail", args=[workload.pk])).content.decode()
    assert f"endpoint at <code>https://{host}/</code>" in detail
    assert reverse("workloads:endpoint_root", args=[workload.pk]) not in detail
    assert signed_in(org["alice"]).get(reverse("workloads:endpoint", args=[workload.pk, "v1/models"])
                                       ).status_code == 404
    assert "models.example.org" not in signed_in(org["bob"]).get(
        reverse("workloads:detail", args=[workload.pk])).content.decode()


def test_in_proxy_mode_no_route_is_made(kubesim, cluster, org):
    workload = submit(org["alice"], serving_pool(kubesim, org, cards=2))
    assert cluster.list("Ingress", namespace="proj-vision") == []
    assert cluster.list("HTTPRoute", namespace="proj-vision") == []
    assert cluster.get("Service", workload.job_name, namespace="proj-vision")


@pytest.fixture(scope="module")
def enforcing():
    with serve(clock="manual", rbac=True) as ks:
        yield ks


def apply_rbac(ks, *files: Path) -> None:
    ks.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": PORTAL_NAMESPACE}})
    ks.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "proj-vision"}})
    for path in files:
        for obj in yaml.safe_load_all(path.read_text()):
            if obj["kind"] in ("ServiceAccount", "Role", "RoleBinding"):  # kustomize sets the base's namespace
                obj["metadata"]["namespace"] = PORTAL_NAMESPACE
            ks.apply(obj)


@pytest.mark.slow
@pytest.mark.parametrize("expose", ["ingress", "httproute"])
def test_the_worker_publishes_with_the_routes_role_and_only_with_it(enforcing, tmp_path, settings, demo, published,
                                                                    expose):
    from django.contrib.auth import get_user_model

    from apps.org import services as org_services

    published(expose)
    admin = get_user_model().objects.get(username="admin")
    pool = org_services.node_pool_create(actor=admin, slug="serve-l4", name="L4 serving", capacity=4, serving=True,
                                         gpu_resource="nvidia.com/gpu", node_labels={"portal.gpu/pool": "serve-l4"})
    org_services.serving_reservation_create(actor=admin, project=Project.objects.get(slug="vision"), node_pool=pool,
                                            cards=4)
    base = [DEPLOY / "base" / "serviceaccounts.yaml", DEPLOY / "base" / "rbac.yaml"]
    try:
        for with_routes in (False, True):
            enforcing.reset()
            apply_rbac(enforcing, *base, *([DEPLOY / "notebook-routes" / "rbac.yaml"] if with_routes else []))
            settings.KUBECONFIG = enforcing.write_kubeconfig(
                str(tmp_path / "worker"), enforcing.service_account_token(PORTAL_NAMESPACE, "gpu-portal-worker"))
            reset_gateway(None)  # the task builds its gateway from settings.KUBECONFIG, as the worker does
            enforcing.clear_rbac_records()
            workload = services.inference_submit(
                actor=demo["alice"], project=Project.objects.get(slug="vision"), node_pool=pool,
                name=f"llama-{int(with_routes)}", image="vllm/vllm-openai:v0.6.3", gpus=1, model_label="llama",
                data_class="public")
            outcome = tasks.workload_submit.apply(args=[workload.pk]).get()
            denials = enforcing.rbac()["denials"]
            if with_routes:
                assert outcome == "submitted" and denials == []
                used = {(g["role"], g["resource"], g["verb"]) for g in enforcing.rbac()["grants"]}
                resource = "ingresses" if expose == "ingress" else "httproutes"
                assert ("ClusterRole/gpu-portal-worker-notebook-routes", resource, "create") in used
            else:  # the cluster's refusal, recorded on the row; the Deployment made before it is taken back
                assert outcome == "rejected", outcome
                resource = "ingresses" if expose == "ingress" else "httproutes"
                assert len(denials) == 1 and resource in denials[0], denials
                left = Gateway(enforcing.api_client()).list("Deployment", namespace="proj-vision")
                assert all(d["metadata"].get("deletionTimestamp") for d in left), left
    finally:
        reset_gateway(None)
