"""A plain batch/v1 Job (no Kueue) on the manual clock: pods on unsuspend, run times, exit codes, status."""

from __future__ import annotations

import threading
import time
import urllib.error

import pytest
from kubernetes.client.rest import ApiException

from tests.kubesim.conftest import job_body, pod_body


def _conds(job) -> dict[str, tuple[str, str]]:
    return {c.type: (c.status, c.reason) for c in job.status.conditions or []}


def _pods(api, ns: str, job: str) -> list:
    return api.core.list_namespaced_pod(ns, label_selector=f"batch.kubernetes.io/job-name={job}").items


def test_suspended_job_has_no_pods_until_resumed_then_finishes(api, ks, ns):
    api.batch.create_namespaced_job(ns, job_body("sj", "sleep 30", suspend=True))
    ks.advance(0)
    assert _pods(api, ns, "sj") == []
    job = api.batch.read_namespaced_job("sj", ns)
    assert _conds(job)["Suspended"] == ("True", "JobSuspended") and not job.status.active
    api.batch.patch_namespaced_job("sj", ns, {"spec": {"suspend": False}})
    pods = _pods(api, ns, "sj")
    assert len(pods) == 1 and pods[0].status.phase == "Running" and pods[0].spec.node_name
    assert pods[0].metadata.owner_references[0].kind == "Job"
    job = api.batch.read_namespaced_job("sj", ns)
    assert job.status.active == 1 and job.status.ready == 1 and job.status.start_time is not None
    assert _conds(job)["Suspended"] == ("False", "JobResumed")
    ks.advance(29)
    assert _pods(api, ns, "sj")[0].status.phase == "Running"
    ks.advance(1)
    pod = _pods(api, ns, "sj")[0]
    assert pod.status.phase == "Succeeded"
    assert pod.status.container_statuses[0].state.terminated.exit_code == 0
    job = api.batch.read_namespaced_job("sj", ns)
    assert job.status.succeeded == 1 and not job.status.active
    assert _conds(job)["Complete"] == ("True", "CompletionsReached")
    assert _conds(job)["SuccessCriteriaMet"][0] == "True"
    assert (job.status.completion_time - job.status.start_time).total_seconds() == 30


def test_exit_code_fails_the_job(api, ks, ns):
    api.batch.create_namespaced_job(ns, job_body("bad", "sleep 5; exit 3", backoffLimit=0))
    ks.advance(5)
    pod = _pods(api, ns, "bad")[0]
    assert pod.status.phase == "Failed"
    assert pod.status.container_statuses[0].state.terminated.exit_code == 3
    job = api.batch.read_namespaced_job("bad", ns)
    assert job.status.failed == 1
    assert _conds(job)["Failed"] == ("True", "BackoffLimitExceeded")
    assert _conds(job)["FailureTarget"][0] == "True"
    reasons = {e.reason for e in api.core.list_namespaced_event(ns, field_selector="involvedObject.name=bad").items}
    assert "BackoffLimitExceeded" in reasons and "SuccessfulCreate" in reasons


def test_retries_with_backoff_until_backoff_limit(api, ks, ns):
    api.batch.create_namespaced_job(ns, job_body("retry", "exit 1", backoffLimit=1))
    ks.advance(0)
    assert [p.status.phase for p in _pods(api, ns, "retry")] == ["Failed"]
    ks.advance(9)
    assert len(_pods(api, ns, "retry")) == 1  # 10 s pod-failure backoff before the replacement
    ks.advance(1)
    assert len(_pods(api, ns, "retry")) == 2
    job = api.batch.read_namespaced_job("retry", ns)
    assert job.status.failed == 2 and _conds(job)["Failed"][0] == "True"


def test_parallel_and_indexed_jobs(api, ks, ns):
    api.batch.create_namespaced_job(ns, job_body("par", "sleep 10", parallelism=3, completions=3))
    assert len(_pods(api, ns, "par")) == 3
    api.batch.create_namespaced_job(
        ns, job_body("idx", "sleep 10", parallelism=2, completions=4, completionMode="Indexed")
    )
    pods = _pods(api, ns, "idx")
    indexes = sorted(p.metadata.annotations["batch.kubernetes.io/job-completion-index"] for p in pods)
    assert indexes == ["0", "1"] and all(p.metadata.name.startswith("idx-") for p in pods)
    ks.advance(10)
    job = api.batch.read_namespaced_job("idx", ns)
    assert job.status.completed_indexes == "0-1" and job.status.active == 2
    ks.advance(10)
    job = api.batch.read_namespaced_job("idx", ns)
    assert job.status.completed_indexes == "0-3" and _conds(job)["Complete"][0] == "True"
    assert api.batch.read_namespaced_job("par", ns).status.succeeded == 3


def test_lowering_parallelism_deletes_extra_pods(api, ks, ns):
    api.batch.create_namespaced_job(ns, job_body("shrink", "sleep 100", parallelism=4, completions=4))
    assert len(_pods(api, ns, "shrink")) == 4
    api.batch.patch_namespaced_job("shrink", ns, {"spec": {"parallelism": 2}})
    assert len(_pods(api, ns, "shrink")) == 2
    assert api.batch.read_namespaced_job("shrink", ns).status.active == 2


def test_suspending_a_running_job_deletes_its_pods(api, ks, ns):
    api.batch.create_namespaced_job(ns, job_body("stop", "sleep 100"))
    assert len(_pods(api, ns, "stop")) == 1
    api.batch.patch_namespaced_job("stop", ns, {"spec": {"suspend": True}})
    assert _pods(api, ns, "stop") == []
    job = api.batch.read_namespaced_job("stop", ns)
    assert not job.status.active and job.status.start_time is None


def test_active_deadline(api, ks, ns):
    api.batch.create_namespaced_job(ns, job_body("dl", "sleep 100", activeDeadlineSeconds=20))
    ks.advance(20)
    job = api.batch.read_namespaced_job("dl", ns)
    assert _conds(job)["Failed"] == ("True", "DeadlineExceeded") and _pods(api, ns, "dl") == []


def test_pod_logs_and_run_seconds_annotation(api, ks, ns):
    body = pod_body("logs", "sleep 3600")
    body["metadata"]["annotations"] = {"kubesim.io/run-seconds": "45"}
    api.core.create_namespaced_pod(ns, body)
    ks.advance(25)
    text = api.core.read_namespaced_pod_log("logs", ns)
    assert text.splitlines()[0].startswith("kubesim: container main started")
    assert text.splitlines()[-1] == "step 2: elapsed 20s"
    ks.advance(20)
    assert api.core.read_namespaced_pod("logs", ns).status.phase == "Succeeded"
    tail = api.core.read_namespaced_pod_log("logs", ns, tail_lines=2).splitlines()
    assert tail == ["step 4: elapsed 40s", "kubesim: container main exited with code 0"]


def test_unschedulable_pod_stays_pending(api, ks, ns):
    body = pod_body("nowhere")
    body["spec"]["nodeSelector"] = {"portal.gpu/pool": "tpu"}
    api.core.create_namespaced_pod(ns, body)
    pod = api.core.read_namespaced_pod("nowhere", ns)
    assert pod.status.phase == "Pending"
    assert pod.status.conditions[0].reason == "Unschedulable"
    with pytest.raises(ApiException) as err:
        api.core.read_namespaced_pod_log("nowhere", ns)
    assert err.value.status == 400
    body = pod_body("h100")
    body["spec"]["nodeSelector"] = {"portal.gpu/pool": "h100"}
    api.core.create_namespaced_pod(ns, body)
    assert api.core.read_namespaced_pod("h100", ns).spec.node_name.startswith("h100-node-")


def test_real_clock_with_speed_runs_jobs_on_its_own():
    from kubernetes import client

    from kubesim.testing import serve

    with serve(clock="real", speed=20.0, kueue=None) as ks:
        api = ks.api_client()
        batch = client.BatchV1Api(api)
        batch.create_namespaced_job("default", job_body("fast", "sleep 10"))
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            job = batch.read_namespaced_job("fast", "default")
            if job.status.succeeded:
                break
            time.sleep(0.05)
        assert job.status.succeeded == 1, "10 emulated seconds at speed 20 take 0.5 s of wall time"
        with pytest.raises(urllib.error.HTTPError) as err:
            ks.advance(1)  # only the manual clock can be stepped
        assert err.value.code == 400
        api.close()


def test_delete_collection_by_label(api, ns):
    for i in range(3):
        api.core.create_namespaced_pod(ns, pod_body(f"dc-{i}", labels={"batch": "a" if i < 2 else "b"}))
    api.core.delete_collection_namespaced_pod(ns, label_selector="batch=a")
    assert [p.metadata.name for p in api.core.list_namespaced_pod(ns).items] == ["dc-2"]


def test_follow_pod_logs_streams_until_the_container_exits(api, ks, ns):
    api.core.create_namespaced_pod(ns, pod_body("follow", "sleep 40"))
    resp = api.core.read_namespaced_pod_log("follow", ns, follow=True, _preload_content=False)
    chunks: list[str] = []
    finished = threading.Event()

    def read() -> None:
        for chunk in resp.stream(1024):
            chunks.append(chunk.decode())
        finished.set()

    threading.Thread(target=read, daemon=True).start()
    deadline = time.monotonic() + 3
    while "running sleep 40" not in "".join(chunks) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "step 1" not in "".join(chunks)
    ks.advance(20)
    deadline = time.monotonic() + 3
    while "step 2: elapsed 20s" not in "".join(chunks) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "step 2: elapsed 20s" in "".join(chunks) and not finished.is_set()
    ks.advance(20)
    assert finished.wait(3)
    assert "".join(chunks).splitlines()[-1] == "kubesim: container main exited with code 0"
