"""JobSet (jobset.x-k8s.io/v1alpha2) as a cluster with the JobSet operator v0.12.0 serves and runs it, without Kueue:
the vendored CRD (discovery, strict schema validation, CEL rules, defaults, status subresource), the operator's
webhooks, and its controller (child Jobs, headless Service, suspend and resume, status, success and failure
policies, startup order, time to live, deletion). Everything goes through the official client."""

from __future__ import annotations

import json

import pytest
from kubernetes.client.rest import ApiException

from kubesim.apiserver.registry.resources import crd_schema
from kubesim.apiserver.validation import cel
from kubesim.apiserver.validation import schema as validation
from tests.kubesim.conftest import JOBSET, jobset_body, raw, replicated_job


def create(api, ns: str, body: dict, **query) -> dict:
    return api.custom.create_namespaced_custom_object(*JOBSET, ns, "jobsets", body, **query)


def get(api, ns: str, name: str) -> dict:
    return api.custom.get_namespaced_custom_object(*JOBSET, ns, "jobsets", name)


def patch(api, ns: str, name: str, body: dict) -> dict:
    return api.custom.patch_namespaced_custom_object(*JOBSET, ns, "jobsets", name, body)


def jobs(api, ns: str) -> dict:
    return {j.metadata.name: j for j in api.batch.list_namespaced_job(ns).items}


def conditions(js: dict) -> dict[str, tuple[str, str, str]]:
    return {c["type"]: (c["status"], c["reason"], c["message"]) for c in js.get("status", {}).get("conditions", [])}


def events(api, ns: str, name: str) -> list[tuple[str, str, str]]:
    evs = api.core.list_namespaced_event(ns, field_selector=f"involvedObject.name={name}").items
    return [(e.type, e.reason, e.message) for e in evs if e.involved_object.kind == "JobSet"]


def failure(exc: pytest.ExceptionInfo[ApiException]) -> dict:
    return json.loads(exc.value.body)


# -- the CRD -----------------------------------------------------------------------------------------------------


def test_every_cel_rule_of_the_jobset_crd_compiles():
    rules = validation.known_rules(crd_schema("jobsets"))
    assert len(rules) == 8
    for rule in rules:
        cel.compile_rule(rule)


def test_discovery_lists_jobsets_with_their_crd(api):
    status, groups = raw(api, "GET", "/apis")
    assert {
        "name": "jobset.x-k8s.io",
        "versions": [{"groupVersion": "jobset.x-k8s.io/v1alpha2", "version": "v1alpha2"}],
        "preferredVersion": {"groupVersion": "jobset.x-k8s.io/v1alpha2", "version": "v1alpha2"},
    } in groups["groups"]
    status, resources = raw(api, "GET", "/apis/jobset.x-k8s.io/v1alpha2")
    assert status == 200
    assert {(r["name"], r["kind"], r["namespaced"]) for r in resources["resources"]} == {
        ("jobsets", "JobSet", True),
        ("jobsets/status", "JobSet", True),
    }
    crd = api.custom.get_cluster_custom_object(
        "apiextensions.k8s.io", "v1", "customresourcedefinitions", "jobsets.jobset.x-k8s.io"
    )
    assert crd["spec"]["versions"][0]["name"] == "v1alpha2" and crd["spec"]["versions"][0]["subresources"] == {
        "status": {}
    }
    status, deployment = raw(api, "GET", "/apis/apps/v1/namespaces/jobset-system/deployments/jobset-controller-manager")
    assert status == 200
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == "registry.k8s.io/jobset/jobset:v0.12.0"


def test_openapi_documents_the_jobset_schema(api):
    status, index = raw(api, "GET", "/openapi/v3")
    url = index["paths"]["apis/jobset.x-k8s.io/v1alpha2"]["serverRelativeURL"]
    status, doc = raw(api, "GET", url)
    assert status == 200
    schema = doc["components"]["schemas"]["io.x-k8s.jobset.v1alpha2.JobSet"]
    assert schema["x-kubernetes-group-version-kind"] == [
        {"group": "jobset.x-k8s.io", "version": "v1alpha2", "kind": "JobSet"}
    ]
    rj = schema["properties"]["spec"]["properties"]["replicatedJobs"]
    assert rj["x-kubernetes-list-type"] == "map" and "template" in rj["items"]["properties"]
    patch = doc["paths"]["/apis/jobset.x-k8s.io/v1alpha2/namespaces/{namespace}/jobsets/{name}"]["patch"]
    assert "fieldValidation" in [p["name"] for p in patch["parameters"]]


def test_unknown_fields_are_refused_under_strict_and_dropped_with_a_warning_otherwise(api, ns):
    body = jobset_body("strict")
    body["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]["bogus"] = 1
    with pytest.raises(ApiException) as exc:
        create(api, ns, body, field_validation="Strict")
    assert exc.value.status == 400
    assert failure(exc)["message"] == (
        'strict decoding error: unknown field "spec.replicatedJobs[0].template.spec.template.spec.containers[0].bogus"'
    )
    status, created = raw(api, "POST", f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{ns}/jobsets", body)
    assert status == 201
    assert "bogus" not in created["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]


def test_schema_types_enums_and_cel_rules(api, ns):
    body = jobset_body("typed", replicated_job("a", replicas="two"))  # type: ignore[arg-type]
    with pytest.raises(ApiException) as exc:
        create(api, ns, body)
    assert exc.value.status == 422
    # a type error skips the CEL rules, as kube-apiserver reports with one cause at <nil>
    assert {c["field"] for c in failure(exc)["details"]["causes"]} == {"spec.replicatedJobs[0].replicas", "<nil>"}

    first, second = replicated_job("a"), replicated_job("b")
    second["dependsOn"] = [{"name": "a", "status": "Ready"}]
    body = jobset_body("both", first, second, startupPolicy={"startupPolicyOrder": "InOrder"})
    with pytest.raises(ApiException) as exc:
        create(api, ns, body)
    assert exc.value.status == 422
    assert failure(exc)["details"]["causes"] == [
        {
            "reason": "FieldValueInvalid",
            "field": "spec",
            "message": 'Invalid value: "object": StartupPolicy and DependsOn APIs are mutually exclusive',
        }
    ]

    second["dependsOn"] = [{"name": "a", "status": "Started"}]
    with pytest.raises(ApiException) as exc:
        create(api, ns, jobset_body("enum", first, second))
    assert failure(exc)["details"]["causes"][0]["message"].startswith('Unsupported value: "Started": supported values:')


def test_immutable_policies_and_dependencies_are_cel_rules(api, ns):
    first, second = replicated_job("a"), replicated_job("b")
    second["dependsOn"] = [{"name": "a", "status": "Complete"}]
    create(api, ns, jobset_body("frozen", first, second, suspend=True))
    with pytest.raises(ApiException) as exc:
        patch(api, ns, "frozen", {"spec": {"successPolicy": {"operator": "Any"}}})
    assert exc.value.status == 422
    assert failure(exc)["details"]["causes"] == [
        {
            "reason": "FieldValueInvalid",
            "field": "spec.successPolicy",
            "message": 'Invalid value: "object": Value is immutable',
        }
    ]
    js = get(api, ns, "frozen")
    js["spec"]["replicatedJobs"][1]["dependsOn"][0]["status"] = "Ready"
    with pytest.raises(ApiException) as exc:
        api.custom.replace_namespaced_custom_object(*JOBSET, ns, "jobsets", "frozen", js)
    assert {c["field"]: c["message"] for c in failure(exc)["details"]["causes"]} == {
        "spec.replicatedJobs[1].dependsOn": 'Invalid value: "array": Value is immutable'
    }


def test_defaults_from_the_schema_and_the_operators_webhook(api, ns):
    rj = replicated_job("w")
    del rj["replicas"]
    del rj["template"]["spec"]["template"]["spec"]["restartPolicy"]
    js = create(api, ns, jobset_body("defaults", rj))
    assert (
        js["spec"]["replicatedJobs"][0]["replicas"] == 1 and js["spec"]["replicatedJobs"][0]["groupName"] == "default"
    )
    job_spec = js["spec"]["replicatedJobs"][0]["template"]["spec"]
    assert job_spec["completionMode"] == "Indexed"
    assert job_spec["template"]["spec"]["restartPolicy"] == "OnFailure"
    assert js["spec"]["successPolicy"] == {"operator": "All"}
    assert js["spec"]["startupPolicy"] == {"startupPolicyOrder": "AnyOrder"}
    assert js["spec"]["network"] == {"enableDNSHostnames": True, "publishNotReadyAddresses": True}


def test_operator_webhook_refuses_names_its_jobs_cannot_have(api, ns):
    name = "j" * 60
    with pytest.raises(ApiException) as exc:
        create(api, ns, jobset_body(name, replicated_job("workers", replicas=10)))
    assert exc.value.status == 422
    body = failure(exc)
    longest = f"{name}-workers-9"
    assert body["reason"] == "Invalid"
    assert body["message"] == (
        f'admission webhook "vjobset.kb.io" denied the request: JobSet.jobset.x-k8s.io "{name}" is invalid: '
        f'[spec.replicatedJobs[0].name: Invalid value: "{longest}": JobSet name is too long, job names generated for '
        f'this JobSet will exceed 63 characters, spec.replicatedJobs[0].name: Invalid value: "{longest}": JobSet name '
        "is too long, pod names generated for this JobSet will exceed 63 characters]"
    )
    assert body["details"]["causes"][0]["field"] == "spec.replicatedJobs[0].name"


def test_operator_webhook_checks_policies(api, ns):
    body = jobset_body(
        "policies",
        successPolicy={"operator": "All", "targetReplicatedJobs": ["nope"]},
        failurePolicy={"maxRestarts": 1, "rules": [{"action": "FailJobSet", "onJobFailureReasons": ["OOM"]}]},
    )
    with pytest.raises(ApiException) as exc:
        create(api, ns, body)
    messages = [c["message"] for c in failure(exc)["details"]["causes"]]
    assert messages == [
        "Internal error: invalid replicatedJob name 'nope' does not appear in .spec.ReplicatedJobs",
        "Internal error: invalid job failure reason 'OOM' in failure policy is not a recognized job failure reason",
    ]


def replace(api, ns: str, name: str, change) -> dict:
    """Read, change, write back the whole JobSet (as Kueue does: a list in a merge patch would replace the
    replicatedJobs without the fields the webhook defaulted)."""
    js = get(api, ns, name)
    change(js)
    return api.custom.replace_namespaced_custom_object(*JOBSET, ns, "jobsets", name, js)


def pod_spec(js: dict, index: int = 0) -> dict:
    return js["spec"]["replicatedJobs"][index]["template"]["spec"]["template"]["spec"]


def test_replicated_jobs_are_immutable_but_for_kueues_fields_while_suspended(api, ns):
    create(api, ns, jobset_body("queued", suspend=True))
    replace(api, ns, "queued", lambda js: pod_spec(js).update(nodeSelector={"pool": "a"}))
    assert pod_spec(get(api, ns, "queued"))["nodeSelector"] == {"pool": "a"}
    with pytest.raises(ApiException) as exc:
        replace(api, ns, "queued", lambda js: js["spec"]["replicatedJobs"][0].update(replicas=3))
    assert exc.value.status == 422
    assert failure(exc)["details"]["causes"][0]["field"] == "spec.replicatedJobs"
    assert failure(exc)["message"].startswith('admission webhook "vjobset.kb.io" denied the request: ')
    patch(api, ns, "queued", {"spec": {"suspend": False}})
    with pytest.raises(ApiException) as exc:
        replace(api, ns, "queued", lambda js: pod_spec(js).update(nodeSelector={"pool": "b"}))
    assert (
        "spec.replicatedJobs: Invalid value: []v1alpha2.ReplicatedJob{...}: field is immutable"
        in failure(exc)["message"]
    )


# -- the controller ------------------------------------------------------------------------------------------------


def test_child_jobs_service_and_status_until_completed(api, ks, ns):
    create(
        api,
        ns,
        jobset_body("train", replicated_job("workers", 2, 2, "sleep 30"), replicated_job("driver", 1, 1, "sleep 10")),
    )
    children = jobs(api, ns)
    assert sorted(children) == ["train-driver-0", "train-workers-0", "train-workers-1"]
    worker = children["train-workers-1"]
    js = get(api, ns, "train")
    expected = {
        "jobset.sigs.k8s.io/jobset-name": "train",
        "jobset.sigs.k8s.io/jobset-uid": js["metadata"]["uid"],
        "jobset.sigs.k8s.io/replicatedjob-name": "workers",
        "jobset.sigs.k8s.io/replicatedjob-replicas": "2",
        "jobset.sigs.k8s.io/global-replicas": "3",
        "jobset.sigs.k8s.io/job-index": "1",
        "jobset.sigs.k8s.io/job-global-index": "1",
        "jobset.sigs.k8s.io/restart-attempt": "0",
        "jobset.sigs.k8s.io/group-name": "default",
        "jobset.sigs.k8s.io/group-replicas": "3",
        "jobset.sigs.k8s.io/job-group-index": "1",
    }
    assert expected.items() <= worker.metadata.labels.items()
    assert expected.items() <= worker.metadata.annotations.items()
    assert len(worker.metadata.labels["jobset.sigs.k8s.io/job-key"]) == 40
    assert expected.items() <= worker.spec.template.metadata.labels.items()
    assert worker.spec.template.spec.subdomain == "train"
    assert worker.metadata.owner_references[0].kind == "JobSet" and worker.metadata.owner_references[0].controller
    assert children["train-driver-0"].metadata.labels["jobset.sigs.k8s.io/job-global-index"] == "2"
    service = api.core.read_namespaced_service("train", ns)
    assert service.spec.cluster_ip == "None" and service.spec.selector == {"jobset.sigs.k8s.io/jobset-name": "train"}
    assert service.spec.publish_not_ready_addresses is True
    pods = api.core.list_namespaced_pod(ns, label_selector="jobset.sigs.k8s.io/jobset-name=train").items
    assert len(pods) == 5 and {p.status.phase for p in pods} == {"Running"}
    assert get(api, ns, "train")["status"] == {
        "restarts": 0,
        "replicatedJobsStatus": [
            {"name": "workers", "ready": 2, "succeeded": 0, "failed": 0, "active": 2, "suspended": 0},
            {"name": "driver", "ready": 1, "succeeded": 0, "failed": 0, "active": 1, "suspended": 0},
        ],
    }
    ks.advance(10)
    assert get(api, ns, "train")["status"]["replicatedJobsStatus"][1]["succeeded"] == 1
    ks.advance(20)
    js = get(api, ns, "train")
    assert conditions(js) == {"Completed": ("True", "AllJobsCompleted", "jobset completed successfully")}
    assert js["status"]["terminalState"] == "Completed"
    assert ("Normal", "AllJobsCompleted", "jobset completed successfully") in events(api, ns, "train")


def test_suspend_and_resume_merge_the_template_into_the_child_jobs(api, ks, ns):
    create(api, ns, jobset_body("paused", replicated_job("w", 1, 2, "sleep 100")))
    assert len(api.core.list_namespaced_pod(ns).items) == 2
    patch(api, ns, "paused", {"spec": {"suspend": True}})
    job = jobs(api, ns)["paused-w-0"]
    assert job.spec.suspend is True and not job.status.active
    assert api.core.list_namespaced_pod(ns).items == []
    js = get(api, ns, "paused")
    assert conditions(js) == {"Suspended": ("True", "SuspendedJobs", "jobset is suspended")}
    assert js["status"]["replicatedJobsStatus"][0]["suspended"] == 1
    toleration = {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}
    replace(
        api,
        ns,
        "paused",
        lambda js: pod_spec(js).update(nodeSelector={"portal.gpu/pool": "h100"}, tolerations=[toleration]),
    )
    patch(api, ns, "paused", {"spec": {"suspend": False}})
    job = jobs(api, ns)["paused-w-0"]
    assert job.spec.suspend is False
    assert job.spec.template.spec.node_selector == {"portal.gpu/pool": "h100"}
    assert [t.key for t in job.spec.template.spec.tolerations] == ["gpu"]
    pods = api.core.list_namespaced_pod(ns).items
    assert len(pods) == 2 and all(p.spec.node_selector == {"portal.gpu/pool": "h100"} for p in pods)
    assert conditions(get(api, ns, "paused"))["Suspended"] == ("False", "ResumeJobs", "jobset is resumed")


def _failing_job(name: str = "w", replicas: int = 1) -> dict:
    """A replicatedJob whose Jobs fail with their first pod (backoffLimit 0)."""
    rj = replicated_job(name, replicas, 1, "sleep 5; exit 1")
    rj["template"]["spec"]["backoffLimit"] = 0
    return rj


def test_a_failed_job_fails_the_jobset_without_a_failure_policy(api, ks, ns):
    create(api, ns, jobset_body("doomed", _failing_job("w", 2)))
    ks.advance(5)
    js = get(api, ns, "doomed")
    status, reason, message = conditions(js)["Failed"]
    assert (status, reason) == ("True", "FailedJobs")
    assert message.startswith("jobset failed due to one or more job failures (first failed job: doomed-w-")
    assert js["status"]["terminalState"] == "Failed"
    assert ("Warning", "FailedJobs", message) in events(api, ns, "doomed")


def _failing(name: str, **policy: object) -> dict:
    return jobset_body(name, _failing_job(), failurePolicy=policy)


def test_failure_policy_restarts_until_max_restarts(api, ks, ns):
    create(api, ns, _failing("retried", maxRestarts=1))
    first_uid = jobs(api, ns)["retried-w-0"].metadata.uid
    ks.advance(5)
    js = get(api, ns, "retried")
    assert js["status"]["restarts"] == 1 and js["status"]["restartsCountTowardsMax"] == 1
    message = "applying RestartJobSet failure policy action (first failed job: retried-w-0)"
    assert ("Warning", "DefaultFailurePolicy", message) in events(api, ns, "retried")  # RestartingJobSet=True
    assert ("Warning", "RestartJobSetFailurePolicyAction", message) in events(api, ns, "retried")
    # the new Jobs' pods are ready at once, which ends the restart
    assert conditions(js)["RestartingJobSet"] == ("False", "JobsReady", "all jobs are ready")
    job = jobs(api, ns)["retried-w-0"]
    assert job.metadata.uid != first_uid and job.metadata.labels["jobset.sigs.k8s.io/restart-attempt"] == "1"
    ks.advance(5)
    js = get(api, ns, "retried")
    assert conditions(js)["Failed"] == (
        "True",
        "ReachedMaxRestarts",
        "jobset failed due to reaching max number of restarts (first failed job: retried-w-0)",
    )
    assert conditions(js)["RestartingJobSet"] == ("False", "JobSetFailed", "jobset failed")


def test_failure_policy_rule_fails_at_once(api, ks, ns):
    create(
        api,
        ns,
        _failing(
            "strict-rule",
            maxRestarts=3,
            rules=[{"action": "FailJobSet", "onJobFailureReasons": ["BackoffLimitExceeded"]}],
        ),
    )
    ks.advance(5)
    assert conditions(get(api, ns, "strict-rule"))["Failed"] == (
        "True",
        "FailJobSetFailurePolicyAction",
        "applying FailJobSet failure policy action (first failed job: strict-rule-w-0)",
    )


def test_success_policy_any_on_a_target_ends_the_rest(api, ks, ns):
    create(
        api,
        ns,
        jobset_body(
            "leader",
            replicated_job("leader", 1, 1, "sleep 5"),
            replicated_job("workers", 2, 1, "sleep 500"),
            successPolicy={"operator": "Any", "targetReplicatedJobs": ["leader"]},
        ),
    )
    ks.advance(5)
    assert conditions(get(api, ns, "leader"))["Completed"][0] == "True"
    assert set(jobs(api, ns)) == {"leader-leader-0"}  # the active workers' Jobs are deleted
    assert [p.metadata.name for p in api.core.list_namespaced_pod(ns).items if p.status.phase == "Running"] == []


def test_in_order_startup_and_depends_on(api, ks, ns):
    create(
        api,
        ns,
        jobset_body(
            "ordered",
            replicated_job("a", 1, 1, "sleep 50"),
            replicated_job("b", 1, 1, "sleep 50"),
            startupPolicy={"startupPolicyOrder": "InOrder"},
        ),
    )
    js = get(api, ns, "ordered")
    assert set(jobs(api, ns)) == {"ordered-a-0", "ordered-b-0"}  # a was ready at once, so b followed
    assert conditions(js)["StartupPolicyCompleted"][:2] == ("True", "InOrderStartupPolicyCompleted")
    assert conditions(js)["StartupPolicyInProgress"][0] == "False"

    first, second = replicated_job("init", 1, 1, "sleep 20"), replicated_job("train", 1, 1, "sleep 50")
    second["dependsOn"] = [{"name": "init", "status": "Complete"}]
    create(api, ns, jobset_body("staged", first, second))
    assert "staged-train-0" not in jobs(api, ns)
    ks.advance(20)
    assert "staged-train-0" in jobs(api, ns)


def test_a_child_job_the_api_would_refuse_is_reported(api, ns):
    rj = replicated_job("w", 1, 2)
    del rj["template"]["spec"]["completions"]  # Indexed (the webhook's default) needs completions
    create(api, ns, jobset_body("broken", rj))
    assert jobs(api, ns) == {}
    warnings = [e for e in events(api, ns, "broken") if e[1] == "JobCreationFailed"]
    assert warnings == [
        (
            "Warning",
            "JobCreationFailed",
            'job "broken-w-0" creation failed with error: Job.batch "broken-w-0" is invalid: spec.completions: '
            "Required value: when completion mode is Indexed",
        )
    ]


def test_ttl_after_finished_deletes_the_jobset(api, ks, ns):
    create(api, ns, jobset_body("brief", replicated_job("w", 1, 1, "sleep 5"), ttlSecondsAfterFinished=30))
    ks.advance(5)
    assert conditions(get(api, ns, "brief"))["Completed"][0] == "True"
    ks.advance(29)
    assert get(api, ns, "brief")
    ks.advance(1)
    with pytest.raises(ApiException) as exc:
        get(api, ns, "brief")
    assert exc.value.status == 404
    assert jobs(api, ns) == {}


def test_deleting_a_jobset_deletes_its_jobs_pods_and_service(api, ns):
    create(api, ns, jobset_body("gone", replicated_job("w", 2, 1, "sleep 100")))
    assert len(jobs(api, ns)) == 2
    api.custom.delete_namespaced_custom_object(*JOBSET, ns, "jobsets", "gone")
    assert jobs(api, ns) == {}
    assert api.core.list_namespaced_pod(ns).items == []
    assert api.core.list_namespaced_service(ns).items == []


def test_a_jobset_managed_by_another_controller_is_left_alone(api, ns):
    create(api, ns, jobset_body("elsewhere", managedBy="kueue.x-k8s.io/multikueue"))
    assert jobs(api, ns) == {}
    assert "status" not in get(api, ns, "elsewhere")
