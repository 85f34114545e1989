"""The Kubernetes events of a workload's objects (its pods, its Job, Kueue's Workload) reach its page, its API detail
and `gpu status`, mirrored by the real watcher from kubesim: an unschedulable pod's FailedScheduling with
kube-scheduler's message, newest first, repeats and several pods counted on one line; events of objects that are no
workload's are not kept."""

from __future__ import annotations

import pytest
from django.urls import reverse
from kubernetes import client as k8s

from apps.workloads.models import CLUSTER_EVENTS_KEPT, WorkloadClusterEvent
from apps.workloads.observation import ClusterEvent
from apps.workloads.services import workload_cluster_events_record
from tests.worker.conftest import signed_in, wait_for
from tests.worker.test_watcher import submit

pytestmark = pytest.mark.slow

UNSCHEDULABLE = "node(s) were unschedulable"


def test_an_unschedulable_pods_failed_scheduling_is_on_the_workload_page(kubesim, org, watcher):
    core = k8s.CoreV1Api(kubesim.api_client())
    for node in ("h100-node-0", "h100-node-1"):  # the pool's nodes cordoned: Kueue admits, no node takes the pod
        core.patch_node(node, {"spec": {"unschedulable": True}})
    workload = submit(kubesim, org["alice"], gpus=4, name="cordoned")
    kubesim.advance(1)
    page_url = reverse("workloads:detail", args=[workload.pk])
    alice = signed_in(org["alice"])

    def page() -> str:
        return alice.get(page_url).content.decode()

    content = wait_for(lambda: (text := page()) and "FailedScheduling" in text and text,
                       timeout=60, describe=lambda: list(WorkloadClusterEvent.objects.values_list("reason", "message")))
    assert "Kubernetes events" in content and UNSCHEDULABLE in content and "default-scheduler" in content
    assert f"Pod/wl-{workload.pk}-" in content
    # The Job's own events are there too, and the newest comes first.
    wait_for(lambda: WorkloadClusterEvent.objects.filter(workload=workload, object_kind="Job").exists())
    detail = alice.get(f"/api/v1/workloads/{workload.pk}/").json()
    events = detail["cluster_events"]
    assert [event["last_seen"] for event in events] == sorted((event["last_seen"] for event in events), reverse=True)
    failed = next(event for event in events if event["reason"] == "FailedScheduling")
    assert failed["type"] == "Warning" and UNSCHEDULABLE in failed["message"] and failed["count"] >= 1
    assert failed["objects"][0].startswith(f"Pod/wl-{workload.pk}-") and failed["reported_by"] == "default-scheduler"
    # Someone who may not see the workload sees neither it nor its events.
    assert signed_in(org["carol"]).get(f"/api/v1/workloads/{workload.pk}/").status_code == 404
    # Uncordoned, the pod is placed; the page keeps what happened.
    core.patch_node("h100-node-0", {"spec": {"unschedulable": False}})
    kubesim.advance(1)
    wait_for(lambda: WorkloadClusterEvent.objects.filter(workload=workload, reason="Scheduled").exists()
             or WorkloadClusterEvent.objects.filter(workload=workload, object_kind="Pod").exclude(
                 reason="FailedScheduling").exists() or "FailedScheduling" in page(), timeout=30)
    assert "FailedScheduling" in page()


def _event(uid: str, *, name: str, kind: str = "Pod", namespace: str = "proj-vision", reason: str = "BackOff",
           message: str = "Back-off pulling image", count: int = 1, at: int = 0) -> ClusterEvent:
    from datetime import UTC, datetime, timedelta

    start = datetime(2026, 12, 1, tzinfo=UTC)
    return ClusterEvent(uid=uid, namespace=namespace, object_kind=kind, object_name=name, type="Warning",
                        reason=reason, message=message, source="kubelet", count=count,
                        first_seen=start, last_seen=start + timedelta(seconds=at))


def test_events_are_kept_per_workload_counted_like_kubectl_describe_and_bounded(org):
    from apps.org.models import NodePool, Project
    from apps.workloads import selectors, services
    from apps.workloads.models import Kind

    workload = services.workload_submit(
        actor=org["alice"], project=Project.objects.get(slug="vision"), kind=Kind.TRAINING, name="pulls",
        image="pytorch/pytorch:2.4.0", command=["true"], node_pool=NodePool.objects.get(slug="h100"), gpus=1,
        model_label="resnet", data_class="public", pods=2)
    pod = f"wl-{workload.pk}"
    kept = workload_cluster_events_record(events=[
        _event("a", name=f"{pod}-0-aaaaa", count=3, at=10),
        _event("b", name=f"{pod}-1-bbbbb", count=2, at=20),  # the other pod, the same back-off
        _event("c", name=f"{pod}-0-aaaaa", reason="Failed", message="ErrImagePull", at=5),
        _event("d", name=pod, kind="Job", reason="SuccessfulCreate", message="Created pod", at=1),
        _event("x", name=f"{pod}-0-aaaaa", namespace="proj-nlp"),  # a namesake in another namespace
        _event("y", name="wl-999999-zzzzz"),  # no such workload
        _event("z", name="web-7d9f", reason="BackOff"),  # not a workload's pod
        _event("p", name=f"{pod}-0-aaaaa", reason="Preempted", message="Preempted by UID ..."),  # names another
        # Kueue's job controller repeats the eviction's words on the Job: another project's workload and paths.
        _event("s", name=pod, kind="Job", reason="Stopped", at=2, message=(
            "Preempted to accommodate a workload (UID: 1011adf2, JobUID: 8b983bae) due to reclamation within the "
            "cohort; preemptor path: /portal-h100/dept-research-h100/proj-nlp-h100/proj-nlp-h100-guaranteed")),
    ])
    assert kept == 4
    # The API server updates an Event (count, last seen): the row follows it.
    workload_cluster_events_record(events=[_event("a", name=f"{pod}-0-aaaaa", count=4, at=30)])
    lines = selectors.cluster_events_of(workload=workload)
    assert [(line.reason, line.count, len(line.objects)) for line in lines] == [
        ("BackOff", 6, 2), ("Failed", 1, 1), ("SuccessfulCreate", 1, 1)]
    assert lines[0].objects == [f"Pod/{pod}-0-aaaaa", f"Pod/{pod}-1-bbbbb"]
    # At most CLUSTER_EVENTS_KEPT per workload: the most recently seen.
    workload_cluster_events_record(events=[_event(f"n{i}", name=f"{pod}-0-aaaaa", message=f"m{i}", at=100 + i)
                                           for i in range(CLUSTER_EVENTS_KEPT)])
    rows = WorkloadClusterEvent.objects.filter(workload=workload)
    assert rows.count() == CLUSTER_EVENTS_KEPT and not rows.filter(uid__in=["a", "b", "c", "d"]).exists()


def _pulling(org):
    from apps.org.models import NodePool, Project
    from apps.workloads import services
    from apps.workloads.models import Kind

    return services.workload_submit(
        actor=org["alice"], project=Project.objects.get(slug="vision"), kind=Kind.TRAINING, name="pulls",
        image="pytorch/pytorch:2.4.0", command=["true"], node_pool=NodePool.objects.get(slug="h100"), gpus=1,
        model_label="resnet", data_class="public")


def test_the_events_of_one_object_are_held_as_one_key_and_only_the_newest_the_portal_keeps(org):
    from worker.gateway import Gateway
    from worker.watcher import Watcher

    watcher = Watcher(Gateway(k8s.ApiClient()))
    pod = f"wl-{_pulling(org).pk}-0-aaaaa"
    late = 2 * CLUSTER_EVENTS_KEPT  # those from here come late, seen between the others

    def seen_at(i: int) -> int:
        return 2 * i if i < late else 2 * (i - late) + late + 1

    for i in range(3 * CLUSTER_EVENTS_KEPT):  # as the watch brings them, one at a time
        watcher.hold_events([_event(f"e{i}", name=pod, message=f"m{i}", at=seen_at(i))])
    watcher.hold_events([_event("p", name=pod, reason="Preempted", message="Preempted by UID ...", at=10_000)])
    assert len(watcher.work) == 1 and watcher.events_held == CLUSTER_EVENTS_KEPT
    watcher.process(watcher.work.get(0.01))
    # What recording every one of them would have kept: the workload's newest by last seen.
    newest = sorted(range(3 * CLUSTER_EVENTS_KEPT), key=seen_at)
    assert set(WorkloadClusterEvent.objects.values_list("uid", flat=True)) == {
        f"e{i}" for i in newest[-CLUSTER_EVENTS_KEPT:]}
    assert watcher.events_held == 0 and not watcher.cluster_events


def test_the_events_watch_waits_while_the_appliers_hold_the_most_events(org, monkeypatch):
    import threading

    from worker.gateway import Gateway
    from worker.watcher import Watcher

    monkeypatch.setattr("worker.watcher.EVENTS_HELD_AT_MOST", 10)
    watcher = Watcher(Gateway(k8s.ApiClient()))
    pod = f"wl-{_pulling(org).pk}"
    watcher.hold_events([_event(f"e{i}", name=f"{pod}-{i}-aaaaa", at=i) for i in range(10)])  # ten objects
    assert len(watcher.work) == 10
    waited = threading.Thread(target=watcher.wait_for_event_room)
    waited.start()
    waited.join(0.5)
    assert waited.is_alive()  # no room
    watcher.process(watcher.work.get(0.01)[:1])  # one object's applied: room for one more
    waited.join(5)
    assert not waited.is_alive() and watcher.events_held == 9
    watcher.stopping.set()
