"""PriorityClasses (scheduling.k8s.io/v1, cluster-scoped), which KAI Scheduler reads on pods: created, listed,
replaced and deleted through the official client under strict field validation, and resolved into a pod's
spec.priority and preemptionPolicy when the pod is created, through the API or by the Job controller."""

import pytest
from kubernetes import client

from tests.kubesim.conftest import job_body, pod_body, raw


@pytest.fixture
def scheduling(api):
    classes = client.SchedulingV1Api(api.client)
    yield classes
    for item in classes.list_priority_class().items:
        classes.delete_priority_class(item.metadata.name)


def test_a_priority_class_is_created_listed_replaced_and_deleted(scheduling):
    created = scheduling.create_priority_class({"metadata": {"name": "build"}, "value": 100,
                                                "description": "Builds."}, field_validation="Strict")
    assert created.value == 100 and created.description == "Builds."
    assert [item.metadata.name for item in scheduling.list_priority_class().items] == ["build"]
    created.description = "Interactive builds."
    assert scheduling.replace_priority_class("build", created).description == "Interactive builds."
    scheduling.delete_priority_class("build")
    assert scheduling.list_priority_class().items == []


def test_strict_validation_refuses_an_unknown_field_and_a_missing_value(api):
    path = "/apis/scheduling.k8s.io/v1/priorityclasses?fieldValidation=Strict"
    typo = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "x"}, "value": 1,
            "valu": 2}
    status, body = raw(api, "POST", path, typo)
    assert status == 400 and 'unknown field "valu"' in body["message"]
    status, body = raw(api, "POST", path, {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                                           "metadata": {"name": "y"}})
    assert status == 422, body


def test_a_pod_gets_the_value_of_the_class_it_names(api, ns, scheduling, ks):
    scheduling.create_priority_class({"metadata": {"name": "train"}, "value": 50, "preemptionPolicy": "Never"})
    pod = api.core.create_namespaced_pod(ns, {**pod_body("p"), "spec": {**pod_body("p")["spec"],
                                                                         "priorityClassName": "train"}})
    assert (pod.spec.priority, pod.spec.preemption_policy) == (50, "Never")
    job = job_body("j")
    job["spec"]["template"]["spec"]["priorityClassName"] = "train"
    api.batch.create_namespaced_job(ns, job)
    ks.advance(0)
    (made,) = api.core.list_namespaced_pod(ns, label_selector="job-name=j").items
    assert made.spec.priority == 50
    unknown = api.core.create_namespaced_pod(ns, {**pod_body("q"), "spec": {**pod_body("q")["spec"],
                                                                             "priorityClassName": "nope"}})
    assert unknown.spec.priority is None  # Kubernetes refuses it (kubesim/README.md, KAI Scheduler)
