"""The emulated DCGM exporter: its page parsed by prometheus_client's own text parser and held to the metric and
label names NVIDIA's dcgm-exporter documents, for a full GPU, a MIG instance and a time-sliced GPU; values follow
the pod's declared pattern on kubesim's clock."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from kubesim.apiserver.nodes import dcgm
from tests.kubesim.conftest import pod_body

# dcgm-exporter's README and default-counters.csv: the labels of every series with pod mapping (-k) on, and
# the MIG ones (https://github.com/NVIDIA/dcgm-exporter, docs.nvidia.com/datacenter/cloud-native/gpu-telemetry).
DEVICE_LABELS = {"gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname", "DCGM_FI_DRIVER_VERSION"}
POD_LABELS = {"namespace", "pod", "container"}
MIG_LABELS = {"GPU_I_ID", "GPU_I_PROFILE"}
DOCUMENTED_METRICS = {
    "DCGM_FI_DEV_GPU_UTIL",
    "DCGM_FI_DEV_MEM_COPY_UTIL",
    "DCGM_FI_DEV_FB_FREE",
    "DCGM_FI_DEV_FB_USED",
    "DCGM_FI_DEV_POWER_USAGE",
    "DCGM_FI_DEV_GPU_TEMP",
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
}


def gpu_pod(name: str, node: str, resource: str, count: int, pattern: str | None = None) -> dict:
    body = pod_body(name, annotations={dcgm.PATTERN_ANNOTATION: pattern} if pattern else {})
    body["spec"]["nodeName"] = node
    body["spec"]["containers"][0]["resources"] = {"limits": {resource: str(count)}, "requests": {resource: str(count)}}
    return body


def scrape(ks, node: str) -> dict[str, list]:
    with urllib.request.urlopen(f"{ks.url}/kubesim/v1/dcgm/{node}/metrics", timeout=10) as response:
        assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = response.read().decode()
    families = {family.name: family for family in text_string_to_metric_families(text)}
    assert set(families) <= DOCUMENTED_METRICS
    for family in families.values():
        assert family.type == "gauge" and family.documentation
    return {name: family.samples for name, family in families.items()}


def of_pod(samples: list, pod: str) -> list:
    return [s for s in samples if s.labels.get("pod") == pod]


def test_a_full_gpu_reports_device_counters_with_the_pod_that_holds_it(ks, api, ns):
    api.core.create_namespaced_pod(ns, gpu_pod("trainer", "h100-node-0", "nvidia.com/gpu", 2, pattern="busy"))
    ks.advance(1)
    metrics = scrape(ks, "h100-node-0")
    assert set(metrics) == DOCUMENTED_METRICS
    util = metrics["DCGM_FI_DEV_GPU_UTIL"]
    assert len(util) == 8  # one series per card of the node
    held = of_pod(util, "trainer")
    assert len(held) == 2 and {s.labels["gpu"] for s in held} == {"0", "1"}
    for sample in held:
        assert set(sample.labels) == DEVICE_LABELS | POD_LABELS
        assert sample.labels["namespace"] == ns and sample.labels["container"] == "main"
        assert sample.labels["modelName"] == "NVIDIA H100 80GB HBM3" and sample.labels["Hostname"] == "h100-node-0"
        assert 90 <= sample.value <= 100
    free = [s for s in util if "pod" not in s.labels]
    assert len(free) == 6 and all(set(s.labels) == DEVICE_LABELS and s.value == 0 for s in free)
    used = {s.labels["gpu"]: s.value for s in metrics["DCGM_FI_DEV_FB_USED"]}
    total = {s.labels["gpu"]: s.value + used[s.labels["gpu"]] for s in metrics["DCGM_FI_DEV_FB_FREE"]}
    assert used["0"] > 0.5 * total["0"] and used["7"] < 0.05 * total["7"]
    assert len({s.labels["UUID"] for s in util}) == 8


def test_a_mig_instance_is_its_own_entity_with_profile_labels_and_no_device_utilisation(ks, api, ns):
    node = "a100-mig-3g40gb-node-0"
    api.core.create_namespaced_pod(ns, gpu_pod("slice", node, "nvidia.com/mig-3g.40gb", 1, pattern="idle"))
    ks.advance(1)
    metrics = scrape(ks, node)
    assert "DCGM_FI_DEV_GPU_UTIL" not in metrics and "DCGM_FI_DEV_POWER_USAGE" not in metrics
    active = metrics["DCGM_FI_PROF_GR_ENGINE_ACTIVE"]
    assert len(active) == 2  # two 3g.40gb instances on the node's one A100
    assert all(set(s.labels) >= DEVICE_LABELS | MIG_LABELS for s in active)
    assert {(s.labels["gpu"], s.labels["GPU_I_ID"]) for s in active} == {("0", "1"), ("0", "2")}
    assert {s.labels["GPU_I_PROFILE"] for s in active} == {"3g.40gb"}
    (held,) = of_pod(active, "slice")
    assert set(held.labels) == DEVICE_LABELS | MIG_LABELS | POD_LABELS and held.value == 0.0
    (memory,) = of_pod(metrics["DCGM_FI_DEV_FB_FREE"], "slice")
    (used,) = of_pod(metrics["DCGM_FI_DEV_FB_USED"], "slice")
    assert memory.value + used.value == 40 * 1024  # the instance's own framebuffer, not the card's


def test_a_time_sliced_gpu_repeats_the_physical_cards_series_for_every_pod_sharing_it(ks, api, ns):
    node = "l40s-shared-node-0"
    api.core.create_namespaced_pod(ns, gpu_pod("share-a", node, "nvidia.com/gpu", 1, pattern="60"))
    api.core.create_namespaced_pod(ns, gpu_pod("share-b", node, "nvidia.com/gpu", 1, pattern="30"))
    ks.advance(1)
    util = scrape(ks, node)["DCGM_FI_DEV_GPU_UTIL"]
    # One physical card (8 replicas): one series per pod on it, each with the card's whole value.
    assert {s.labels["pod"] for s in util} == {"share-a", "share-b"}
    assert {s.labels["gpu"] for s in util} == {"0"} and len({s.labels["UUID"] for s in util}) == 1
    assert [s.value for s in util] == [90, 90]
    assert all(set(s.labels) == DEVICE_LABELS | POD_LABELS for s in util)


def test_values_follow_the_pattern_on_kubesims_clock(ks, api, ns):
    pod = gpu_pod("steps", "h100-node-1", "nvidia.com/gpu", 1, pattern="80,10")
    pod["metadata"]["annotations"][dcgm.PATTERN_STEP_ANNOTATION] = "5"
    api.core.create_namespaced_pod(ns, pod)
    ks.advance(1)

    def now_value() -> float:
        return of_pod(scrape(ks, "h100-node-1")["DCGM_FI_DEV_GPU_UTIL"], "steps")[0].value

    assert now_value() == 80
    ks.advance(5)
    assert now_value() == 10
    ks.advance(5)
    assert now_value() == 80
    api.core.delete_namespaced_pod("steps", ns)
    ks.advance(1)
    assert of_pod(scrape(ks, "h100-node-1")["DCGM_FI_DEV_GPU_UTIL"], "steps") == []


@pytest.mark.parametrize(
    ("pattern", "low", "high"),
    [("busy", 90, 100), ("idle", 0, 0), ("training", 80, 100), ("", 80, 100), ("bursty", 2, 95), ("42", 42, 42)],
)
def test_patterns_stay_in_their_range(pattern, low, high):
    values = [dcgm.pattern_value(pattern, seconds, seed=7) for seconds in range(20, 280)]
    assert low <= min(values) and max(values) <= high
    if pattern == "bursty":
        assert {round(v) for v in values} == {2, 95}


def test_an_unknown_node_is_a_404(ks):
    with pytest.raises(urllib.error.HTTPError) as error:
        urllib.request.urlopen(f"{ks.url}/kubesim/v1/dcgm/nowhere/metrics", timeout=10)
    assert error.value.code == 404
