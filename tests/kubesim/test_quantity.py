"""Quantities: one strict parser (kubesim.kernel.quantity); a malformed quantity anywhere in a request is a clean 4xx
Status, never a 500, and never reaches the controllers."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from decimal import Decimal

import pytest

from kubesim.kernel.quantity import (
    MAX_VALUE,
    Quantity,
    QuantityError,
    decimal_value,
    format_amount,
    parse_quantity,
    to_amount,
)
from kubesim.testing import InProcessKubesim, serve

MALFORMED = ["1.2.3", "", "1e", "--1", "1Kii", "\u0661", "\x00", "1\x00", " 1", "1\n", "1e1.5", ".", "+.", "1.5e3Ki"]
KUEUE = "/apis/kueue.x-k8s.io/v1beta2"


def test_parser_accepts_kubes_grammar():
    cases = {
        "500m": Decimal("0.5"),
        "2": Decimal(2),
        "+1k": Decimal(1000),
        "-1": Decimal(-1),
        ".5": Decimal("0.5"),
        "5.": Decimal(5),
        "1.5Gi": Decimal(1536 * 2**20),
        "1e3": Decimal(1000),
        "1E-3": Decimal("0.001"),
        "100n": Decimal("1e-7"),
        "3u": Decimal("3e-6"),
        "2Ei": Decimal(2 * 2**60),
        "1P": Decimal(10**15),
    }
    for text, value in cases.items():
        assert parse_quantity(text).value == value, text
    assert parse_quantity(3).value == 3 and parse_quantity(0.25).value == Decimal("0.25")
    assert to_amount("cpu", "1500m") == 1500 and to_amount("memory", "1Gi") == 2**30
    assert to_amount("cpu", "1n") == 1  # rounded up, as Kueue's MilliValue does
    assert format_amount("memory", 2**30) == "1Gi" and format_amount("cpu", 500) == "500m"
    assert str(Quantity("2048Ki")) == "2Mi"


@pytest.mark.parametrize("value", [*MALFORMED, "1e99999999999", True, None, float("nan"), float("inf"), [1], {}])
def test_parser_refuses_malformed_quantities(value):
    with pytest.raises(QuantityError) as err:
        parse_quantity(value)
    assert isinstance(err.value, ValueError)
    assert "quantit" in str(err.value)
    with pytest.raises(QuantityError):
        decimal_value(value)


def test_huge_quantities_are_capped_like_kube():
    assert parse_quantity("1e30").value == MAX_VALUE
    assert parse_quantity("-100000Ei").value == -MAX_VALUE
    assert parse_quantity("9" * 5000).value == MAX_VALUE
    assert parse_quantity("1e2147483647").value == MAX_VALUE
    assert str(parse_quantity("1e-40")) == "1e-9"


@pytest.fixture(scope="module")
def ks() -> Iterator[InProcessKubesim]:
    with serve(clock="manual") as server:
        _request(server, "POST", f"{KUEUE}/resourceflavors", {"metadata": {"name": "qty-flavor"}, "spec": {}})
        yield server


def _request(ks: InProcessKubesim, method: str, path: str, body: dict) -> tuple[int, dict]:
    req = urllib.request.Request(
        ks.url + path, data=json.dumps(body).encode(), method=method, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _cluster_queue(name: str, quota: object, weight: object = "1") -> dict:
    resources = [{"name": "cpu", "nominalQuota": quota}]
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            "namespaceSelector": {},
            "fairSharing": {"weight": weight},
            "resourceGroups": [
                {"coveredResources": ["cpu"], "flavors": [{"name": "qty-flavor", "resources": resources}]}
            ],
        },
    }


def _container(cpu: object) -> dict:
    return {"name": "main", "image": "busybox:1.36", "resources": {"requests": {"cpu": cpu}, "limits": {"cpu": cpu}}}


def _job(name: str, cpu: object) -> dict:
    spec = {"restartPolicy": "Never", "containers": [_container(cpu)]}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}, "spec": {"template": {"spec": spec}}}


def _workload(name: str, cpu: object) -> dict:
    podset = {"name": "main", "count": 1, "template": {"spec": {"containers": [_container(cpu)]}}}
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": name},
        "spec": {"queueName": "qty-lq", "podSets": [podset]},
    }


@pytest.mark.parametrize("index", range(len(MALFORMED)))
def test_malformed_quantities_through_the_api_are_4xx(ks, index):
    value = MALFORMED[index]
    attempts = [
        ("POST", f"{KUEUE}/clusterqueues", _cluster_queue(f"bad-quota-{index}", value)),
        ("POST", f"{KUEUE}/clusterqueues", _cluster_queue(f"bad-weight-{index}", "1", value)),
        ("POST", "/apis/batch/v1/namespaces/default/jobs", _job(f"bad-job-{index}", value)),
        ("POST", "/api/v1/namespaces/default/pods", {**_job("", value)["spec"]["template"], "metadata": {"name": "p"}}),
        ("POST", f"{KUEUE}/namespaces/default/workloads", _workload(f"bad-wl-{index}", value)),
    ]
    for method, path, body in attempts:
        code, status = _request(ks, method, path, body)
        assert code in (400, 422), (path, value, code, status)
        # kube's decoding error (BadRequest), the CRD's OpenAPI quantity pattern (Invalid), or a Kueue webhook that
        # could not decode the object (controller-runtime's Errored: no reason, the webhook named)
        webhook = status["message"].startswith("admission webhook ")
        assert status["kind"] == "Status" and status.get("reason") in ("BadRequest", "Invalid", None), status
        assert (status.get("reason") is None) == webhook, status
        assert "quantities must match" in status["message"] or "should match" in status["message"], status
    # Nothing malformed was stored, so the controllers still settle and the cluster still takes writes.
    assert ks.advance(0)
    code, _ = _request(ks, "POST", f"{KUEUE}/clusterqueues", _cluster_queue(f"good-{index}", "2", "0.5"))
    assert code == 201


def test_malformed_quantity_in_workload_status_is_refused(ks):
    """The pattern admits `1e1.5`: the Workload webhook, decoding the object, refuses it (400 under its name); what
    the pattern refuses is the schema's 422."""
    code, made = _request(ks, "POST", f"{KUEUE}/namespaces/default/workloads", _workload("status-qty", "1"))
    assert code == 201
    made["status"] = {"resourceRequests": [{"name": "main", "resources": {"cpu": "1e1.5"}}]}
    path = f"{KUEUE}/namespaces/default/workloads/status-qty/status"
    code, status = _request(ks, "PUT", path, made)
    assert code == 400 and status["message"].startswith('admission webhook "vworkload.kb.io" denied the request: ')
    made["status"]["resourceRequests"][0]["resources"]["cpu"] = "1.2.3"
    code, status = _request(ks, "PUT", path, made)
    assert code == 422 and status["reason"] == "Invalid"
    assert status["details"]["causes"][0]["field"] == "status.resourceRequests[0].resources.cpu"
    assert ks.advance(0)
