"""Kubernetes protobuf request bodies (what kubectl's generator commands send), decoded to kube's JSON form.

The bodies are built with the protobuf package from the same field table kubesim decodes with; that the field
numbers are Kubernetes' own is what tests/kubesim/test_kubectl.py checks against a real kubectl.
"""

from __future__ import annotations

from kubesim.apiserver.http import k8sproto
from tests.kubesim.conftest import http, raw

CORE = "k8s.io.api.core.v1"
META = "k8s.io.apimachinery.pkg.apis.meta.v1"


def _envelope(api_version: str, kind: str, message) -> bytes:
    unknown = k8sproto.message_class(k8sproto.UNKNOWN)()
    unknown.typeMeta.apiVersion = api_version
    unknown.typeMeta.kind = kind
    unknown.raw = message.SerializeToString()
    unknown.contentType = ""
    return k8sproto.MAGIC + unknown.SerializeToString()


def _pod_template(spec) -> None:
    container = spec.containers.add()
    container.name, container.image = "main", "busybox"
    container.command.extend(["sleep", "5"])
    container.resources.requests["cpu"].string = "500m"
    spec.restartPolicy = "Never"


def test_a_protobuf_job_is_stored_as_kube_would_decode_it(api, ns):
    job = k8sproto.message_class("k8s.io.api.batch.v1.Job")()
    job.metadata.name = "from-proto"
    job.metadata.labels["team"] = "ml"
    # Go writes every non-pointer field, set or not: the zero Time, empty strings, a zero generation.
    job.metadata.creationTimestamp.SetInParent()
    job.metadata.generateName = ""
    job.spec.template.metadata.generation = 0
    job.spec.template.metadata.creationTimestamp.SetInParent()
    job.spec.backoffLimit = 0
    _pod_template(job.spec.template.spec)
    resp = http(api, "POST", f"/apis/batch/v1/namespaces/{ns}/jobs", None, k8sproto.MEDIA_TYPE)
    assert resp.status == 400  # no body at all is still a bad request
    pool = api.client.rest_client.pool_manager
    resp = pool.request(
        "POST",
        f"{api.client.configuration.host}/apis/batch/v1/namespaces/{ns}/jobs?fieldValidation=Strict",
        body=_envelope("batch/v1", "Job", job),
        headers={"Content-Type": k8sproto.MEDIA_TYPE, "Accept": f"{k8sproto.MEDIA_TYPE},application/json"},
    )
    assert resp.status == 201, resp.data
    assert resp.headers["Content-Type"] == k8sproto.MEDIA_TYPE  # the answer in the protobuf the client prefers
    stored = k8sproto.decode(resp.data)
    assert stored["metadata"]["uid"] and stored["metadata"]["creationTimestamp"]
    assert stored["metadata"]["labels"] == {"team": "ml"}
    assert stored["spec"]["backoffLimit"] == 0
    container = stored["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["sleep", "5"]
    assert container["resources"] == {"requests": {"cpu": "500m"}}
    assert stored["spec"]["template"]["spec"]["restartPolicy"] == "Never"
    _, as_json = raw(api, "GET", f"/apis/batch/v1/namespaces/{ns}/jobs/from-proto")
    assert as_json["spec"]["template"]["spec"]["containers"] == stored["spec"]["template"]["spec"]["containers"]


def test_secret_bytes_become_base64_and_times_rfc3339():
    secret = k8sproto.message_class(f"{CORE}.Secret")()
    secret.metadata.name = "pw"
    secret.metadata.creationTimestamp.seconds = 1767225600
    secret.data["password"] = b"s3cret"
    secret.type = "Opaque"
    decoded = k8sproto.decode(_envelope("v1", "Secret", secret))
    assert decoded == {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "pw", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "data": {"password": "czNjcmV0"},
        "type": "Opaque",
    }


def test_int_or_string_and_unknown_kinds():
    service = k8sproto.message_class(f"{CORE}.Service")()
    service.metadata.name = "web"
    port = service.spec.ports.add(port=80)
    port.targetPort.type = 1
    port.targetPort.strVal = "http"
    decoded = k8sproto.decode(_envelope("v1", "Service", service))
    assert decoded["spec"]["ports"] == [{"port": 80, "targetPort": "http"}]
    try:
        k8sproto.decode(_envelope("batch/v1", "CronJob", service))
    except k8sproto.ProtobufError as exc:
        assert "CronJob" in str(exc)
    else:
        raise AssertionError("an unknown kind must not decode")
    try:
        k8sproto.decode(b"{}")
    except k8sproto.ProtobufError as exc:
        assert "magic" in str(exc)
    else:
        raise AssertionError("a body without the magic number must not decode")
