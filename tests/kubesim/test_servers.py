"""Notebook servers in kubesim: they run until stopped and answer like Jupyter through the service proxy; headless
Services resolve their pods' hostnames in Endpoints; Secrets' stringData is merged into data."""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request

import pytest

from kubesim.apiserver.auth.kubeconfig import TOKEN
from kubesim.testing import RequestError
from tests.kubesim.conftest import job_body


def _notebook(api, ns: str) -> None:
    api.core.create_namespaced_secret(ns, {"metadata": {"name": "nb-token"}, "stringData": {"token": "s3cret"}})
    body = job_body("nb")
    container = body["spec"]["template"]["spec"]["containers"][0]
    container.pop("command")
    container["image"] = "quay.io/jupyter/base-notebook:2024-05-27"
    container["ports"] = [{"name": "http", "containerPort": 8888}]
    container["env"] = [{"name": "JUPYTER_TOKEN", "valueFrom": {"secretKeyRef": {"name": "nb-token", "key": "token"}}}]
    body["spec"]["template"]["metadata"] = {"labels": {"app": "nb"}}
    api.batch.create_namespaced_job(ns, body)
    api.core.create_namespaced_service(ns, {"metadata": {"name": "nb"}, "spec": {
        "selector": {"app": "nb"}, "ports": [{"name": "http", "port": 80, "targetPort": 8888}]}})


def _get(ks, path: str, headers: dict | None = None) -> tuple[int, str]:
    request = urllib.request.Request(f"{ks.url}{path}", headers={"Authorization": f"Bearer {TOKEN}",
                                                                 **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def test_a_jupyter_pod_runs_until_stopped_and_answers_behind_its_token(ks, api, ns):
    _notebook(api, ns)
    ks.advance(1)
    ks.advance(24 * 3600)  # far past any default run time
    pods = api.core.list_namespaced_pod(ns).items
    assert [p.status.phase for p in pods] == ["Running"]
    base = f"/api/v1/namespaces/{ns}/services/nb:http/proxy"
    code, page = _get(ks, f"{base}/lab")
    assert code == 403 and "JupyterLab" not in page
    code, page = _get(ks, f"{base}/lab", {"X-Ignored": "1"})
    assert code == 403
    code, page = _get(ks, f"{base}/lab?token=wrong")
    assert code == 403
    code, status = _get(ks, f"{base}/api/status")
    assert code == 403
    code, status = _get(ks, f"{base}/api/status?token=s3cret")
    before = json.loads(status)
    assert code == 200 and before["last_activity"] == before["started"]  # nobody has used it yet
    ks.advance(60)
    code, page = _get(ks, f"{base}/lab?token=s3cret")
    assert code == 200 and "<title>JupyterLab</title>" in page
    after = json.loads(_get(ks, f"{base}/api/status", {"Authorization": "token s3cret"})[1])
    assert after["last_activity"] > before["last_activity"]
    # Tests report activity through the control endpoint too.
    ks.advance(60)
    ks.report_activity(ns, pods[0].metadata.name)
    latest = json.loads(_get(ks, f"{base}/api/status?token=s3cret")[1])
    assert latest["last_activity"] > after["last_activity"]


def test_the_proxy_says_when_nothing_serves(ks, api, ns):
    api.core.create_namespaced_service(ns, {"metadata": {"name": "empty"}, "spec": {
        "selector": {"app": "none"}, "ports": [{"port": 80}]}})
    assert _get(ks, f"/api/v1/namespaces/{ns}/services/empty:80/proxy/")[0] == 503
    assert _get(ks, f"/api/v1/namespaces/{ns}/services/missing/proxy/")[0] == 404


def test_secret_string_data_is_stored_as_data(api, ns):
    api.core.create_namespaced_secret(ns, {"metadata": {"name": "s"}, "stringData": {"k": "v"}})
    secret = api.core.read_namespaced_secret("s", ns)
    assert secret.data == {"k": base64.b64encode(b"v").decode()} and secret.string_data is None


def test_a_headless_service_resolves_an_indexed_jobs_pods(ks, api, ns):
    body = job_body("gang", command="sleep 600", completions=3, parallelism=3, completionMode="Indexed")
    body["spec"]["template"]["metadata"] = {"labels": {"gang": "g"}}
    body["spec"]["template"]["spec"]["subdomain"] = "gang"
    api.batch.create_namespaced_job(ns, body)
    api.core.create_namespaced_service(ns, {"metadata": {"name": "gang"}, "spec": {
        "clusterIP": "None", "selector": {"gang": "g"}, "publishNotReadyAddresses": True,
        "ports": [{"name": "rdzv", "port": 29500}]}})
    ks.advance(1)
    endpoints = api.core.read_namespaced_endpoints("gang", ns)
    by_host = {a.hostname: a for a in endpoints.subsets[0].addresses}
    assert sorted(by_host) == ["gang-0", "gang-1", "gang-2"]
    pods = {p.metadata.name: p for p in api.core.list_namespaced_pod(ns).items}
    for address in by_host.values():
        assert pods[address.target_ref.name].status.pod_ip == address.ip
    ks.advance(600)
    assert not api.core.read_namespaced_endpoints("gang", ns).subsets  # finished pods leave


@pytest.mark.parametrize("volume", [{"name": "v", "nfs": {"server": "nfs", "path": "/x", "bogus": 1}},
                                    {"name": "v", "persistentVolumeClaim": {"claim": "x"}}])
def test_strict_validation_knows_volume_sources(ks, ns, volume):
    body = job_body("bad")
    body["metadata"]["namespace"] = ns
    body["spec"]["template"]["spec"]["volumes"] = [volume]
    with pytest.raises(RequestError) as caught:
        ks.apply(body)
    assert caught.value.status["code"] in (400, 422)


def _post(ks, path: str, body: bytes) -> tuple[int, dict]:
    request = urllib.request.Request(f"{ks.url}{path}", data=body, method="POST", headers={
        "Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_a_deployments_pod_declaring_a_port_stands_in_for_a_model_server(ks, api, ns):
    from kubernetes import client

    container = {"name": "server", "image": "vllm/vllm-openai:v0.6.3", "args": ["--model", "meta-llama/Llama-3.1-8B"],
                 "ports": [{"name": "http", "containerPort": 8000}]}
    client.AppsV1Api(api.client).create_namespaced_deployment(ns, {
        "metadata": {"name": "llm"}, "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "llm"}}, "template": {
            "metadata": {"labels": {"app": "llm"}}, "spec": {"containers": [container]}}}})
    api.core.create_namespaced_service(ns, {"metadata": {"name": "llm"}, "spec": {
        "selector": {"app": "llm"}, "ports": [{"name": "http", "port": 80, "targetPort": 8000}]}})
    ks.advance(1)
    ks.advance(24 * 3600)  # a server serves until it is stopped
    assert [p.status.phase for p in api.core.list_namespaced_pod(ns).items] == ["Running"]
    base = f"/api/v1/namespaces/{ns}/services/llm:http/proxy"
    assert _get(ks, f"{base}/health")[0] == 200
    code, models = _get(ks, f"{base}/v1/models")
    assert code == 200 and [m["id"] for m in json.loads(models)["data"]] == ["meta-llama/Llama-3.1-8B"]
    code, completion = _post(ks, f"{base}/v1/completions", json.dumps({"prompt": "hello there"}).encode())
    assert code == 200 and completion["choices"][0]["text"] == "hello there", completion
    assert completion["model"] == "meta-llama/Llama-3.1-8B"
    assert _post(ks, f"{base}/v1/completions", b"not json")[0] == 400
    assert _get(ks, f"{base}/lab")[0] == 404  # nothing but the model server's paths


def test_a_port_of_a_jobs_pod_that_is_no_jupyter_server_is_not_answered(ks, api, ns):
    body = job_body("plain")
    body["spec"]["template"]["spec"]["containers"][0]["ports"] = [{"name": "http", "containerPort": 8000}]
    body["spec"]["template"]["metadata"] = {"labels": {"app": "plain"}}
    api.batch.create_namespaced_job(ns, body)
    api.core.create_namespaced_service(ns, {"metadata": {"name": "plain"}, "spec": {
        "selector": {"app": "plain"}, "ports": [{"name": "http", "port": 80, "targetPort": 8000}]}})
    ks.advance(1)
    code, _ = _get(ks, f"/api/v1/namespaces/{ns}/services/plain:http/proxy/health")
    assert code == 502  # connection refused: kubesim emulates nothing there
