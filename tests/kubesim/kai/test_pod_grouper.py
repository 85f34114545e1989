"""KAI's pod-grouper (v0.20.1) in kubesim: which PodGroup each KAI pod belongs to. An ownerless pod that names its
PodGroup keeps it; any other pod is grouped by its top owner (a Job's pods one PodGroup each, any other owner's pods
one PodGroup together), the pod's own `pod-group-name` overwritten; a pod whose owner is gone stays ungrouped."""

from __future__ import annotations

from tests.crd_schemas import validate_kai_object
from tests.kubesim.conftest import JOBSET, jobset_body, replicated_job
from tests.kubesim.kai.conftest import GROUP, bound, kai_nodes, make_pod, make_queue, pod_group_of

KAI_LABELS = {"kai.scheduler/queue": "q", "kai.scheduler/node-pool": "kai"}


def pod_groups(api) -> dict[str, dict]:
    listed = api.custom.list_namespaced_custom_object(GROUP, "v2alpha2", "team", "podgroups")["items"]
    return {group["metadata"]["name"]: group for group in listed}


def job(api, name: str, *, parallelism: int = 1, labels: dict | None = None, annotations: dict | None = None) -> dict:
    """A batch/v1 Job whose pods ask for KAI (and name a PodGroup of their own when `annotations` say so)."""
    body = {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "labels": labels or {}},
            "spec": {"parallelism": parallelism, "completions": parallelism, "completionMode": "Indexed",
                     "template": {"metadata": {"labels": {"kai.scheduler/queue": "q"},
                                               "annotations": annotations or {}},
                                  "spec": {"schedulerName": "kai-scheduler", "restartPolicy": "Never",
                                           "containers": [{"name": "main", "image": "busybox:1.36",
                                                           "command": ["sleep", "3600"],
                                                           "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}}
    return api.batch.create_namespaced_job("team", body).to_dict()


def pods(api) -> dict[str, object]:
    return {pod.metadata.name: pod for pod in api.core.list_namespaced_pod("team").items}


def test_an_ownerless_pod_keeps_the_pod_group_it_names_and_waits_while_that_is_missing(cluster):
    api = cluster(kai_nodes("kai", 1, 2))
    make_queue(api, "q", quota=2)
    make_pod(api, "solo", "q", group="mine")
    assert bound(api) == {} and pod_groups(api) == {}  # nothing made for it: it waits for its own
    assert pods(api)["solo"].metadata.annotations["pod-group-name"] == "mine"
    api.custom.create_namespaced_custom_object(GROUP, "v2alpha2", "team", "podgroups", {
        "apiVersion": f"{GROUP}/v2alpha2", "kind": "PodGroup",
        "metadata": {"name": "mine", "labels": {"kai.scheduler/node-pool": "kai"}},
        "spec": {"minMember": 1, "queue": "q"}})
    api.ks.sim.advance(0)
    assert set(bound(api)) == {"solo"} and set(pod_groups(api)) == {"mine"}


def test_an_ownerless_pod_without_one_is_its_own_top_owner(cluster):
    api = cluster(kai_nodes("kai", 1, 2))
    make_queue(api, "q", quota=2)
    make_pod(api, "solo", "q", priority_class="build", preemptibility="non-preemptible")
    uid = pods(api)["solo"].metadata.uid
    group = pod_group_of(api, "solo")
    assert group["metadata"]["name"] == f"pg-solo-{uid}"
    assert group["metadata"]["ownerReferences"] == [{"apiVersion": "v1", "kind": "Pod", "name": "solo", "uid": uid}]
    assert group["spec"] == {"minMember": 1, "queue": "q", "priorityClassName": "build",
                             "preemptibility": "non-preemptible"}
    validate_kai_object(group)


def test_a_jobs_pods_get_a_pod_group_each_and_lose_the_one_they_named(cluster):
    api = cluster(kai_nodes("kai", 1, 4))
    make_queue(api, "q", quota=4)
    created = job(api, "pair", parallelism=2, labels={**KAI_LABELS, "team": "vision"},
                  annotations={"pod-group-name": "pair"})
    uid = created["metadata"]["uid"]
    names = {name: pod.metadata.annotations["pod-group-name"] for name, pod in pods(api).items()}
    assert len(names) == 2 and all(group == f"pg-{pod}-{uid}" for pod, group in names.items())
    groups = pod_groups(api)
    assert set(groups) == set(names.values())  # no gang: the Job's own name is overwritten on every pod
    for group in groups.values():
        assert group["spec"] == {"minMember": 1, "queue": "q", "priorityClassName": "train"}  # KAI's fallback
        assert group["metadata"]["labels"] == {**KAI_LABELS, "team": "vision"}  # the Job's labels
        assert group["metadata"]["ownerReferences"] == [{"apiVersion": "batch/v1", "kind": "Job", "name": "pair",
                                                         "uid": uid}]
        validate_kai_object(group)
    assert len(bound(api)) == 2  # each alone, one by one


def test_the_top_owners_labels_come_before_the_pods(cluster):
    api = cluster(kai_nodes("kai", 1, 2))
    make_queue(api, "q", quota=2)
    make_queue(api, "other", quota=2)
    job(api, "labelled", labels={"kai.scheduler/queue": "other", "kai.scheduler/preemptibility": "preemptible",
                                 "priorityClassName": "inference", "kai.scheduler/node-pool": "kai"})
    (name,) = pods(api)
    group = pod_group_of(api, name)
    assert group["spec"] == {"minMember": 1, "queue": "other", "priorityClassName": "inference",
                             "preemptibility": "preemptible"}
    assert group["metadata"]["labels"]["kai.scheduler/node-pool"] == "kai"


def test_pods_under_a_jobset_share_one_pod_group_named_after_it(cluster):
    api = cluster(kai_nodes("kai", 1, 4))
    make_queue(api, "q", quota=4)
    body = jobset_body("trainer", replicated_job("worker", replicas=2, schedulerName="kai-scheduler",
                                                 requests={"nvidia.com/gpu": "1"}),
                       labels=KAI_LABELS)
    created = api.custom.create_namespaced_custom_object(*JOBSET, "team", "jobsets", body)
    api.ks.sim.advance(0)
    expected = f"pg-trainer-{created['metadata']['uid']}"
    found = pods(api)
    assert len(found) == 2 and {pod.metadata.annotations["pod-group-name"] for pod in found.values()} == {expected}
    group = pod_groups(api)[expected]
    assert group["spec"]["minMember"] == 1 and group["spec"]["queue"] == "q"
    assert group["metadata"]["ownerReferences"][0]["kind"] == "JobSet"


def test_a_pod_whose_owner_is_gone_stays_ungrouped_and_unscheduled(cluster):
    api = cluster(kai_nodes("kai", 1, 2))
    make_queue(api, "q", quota=2)
    api.core.create_namespaced_pod("team", {
        "metadata": {"name": "orphan", "labels": KAI_LABELS, "annotations": {"pod-group-name": "orphan"},
                     "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "gone",
                                          "uid": "00000000-0000-0000-0000-000000000000"}]},
        "spec": {"schedulerName": "kai-scheduler", "restartPolicy": "Never",
                 "containers": [{"name": "main", "image": "busybox:1.36", "command": ["sleep", "60"]}]}})
    api.ks.sim.advance(0)
    assert bound(api) == {} and pod_groups(api) == {}
    events = api.core.list_namespaced_event("team", field_selector="involvedObject.name=orphan").items
    assert [event.reason for event in events if event.type == "Warning"] == ["PodGrouperWarning"]
