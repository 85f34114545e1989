"""`gpu submit -f` with a Kubernetes manifest against a served portal: told from a job file by its apiVersion and
kind, sent as the API's manifest submission with where and how it runs from the flags, its refusals printed with
their field paths and exit code 6, and every kind the portal submits followed to its GPU-hours as through the API."""

from __future__ import annotations

import json

import pytest
import yaml

from apps.core.models import Intent
from apps.workloads.models import Workload
from tests.portal_cli.support import gpu, gpu_json, gpu_process
from tests.worker.manifest_kinds import CASES, follow_to_the_end, job_manifest

pytestmark = pytest.mark.slow
WHERE = ["-p", "vision", "--pool", "h100", "--model", "resnet", "--data-class", "public"]


def nothing_submitted() -> None:
    assert not Workload.objects.exists() and not Intent.objects.filter(kind="workload.submit").exists()


@pytest.mark.parametrize("kind", list(CASES))
def test_each_kind_through_gpu_submit_runs_and_is_counted(signed_in, kubesim, cluster, celery_worker, watcher, org,
                                                          tmp_path, kind):
    manifest = tmp_path / "work.yaml"
    manifest.write_text(yaml.safe_dump(CASES[kind].build(300)))
    created = gpu_json("submit", "-f", str(manifest), *WHERE, "--non-preemptible")
    assert created["kind"] == kind and created["status"] == "submitting" and not created["preemptible"]

    def stop() -> None:
        assert gpu_json("stop", str(created["id"]))["status"] == "stopping"

    follow_to_the_end(kubesim=kubesim, cluster=cluster, workload_id=created["id"], kind=kind, stop=stop,
                      owner_id=org["alice"].pk)
    assert gpu_json("status", str(created["id"]))["kind"] == kind


def test_a_manifest_on_stdin_takes_its_project_from_its_namespace(signed_in, home):
    manifest = job_manifest(60)
    manifest["metadata"]["namespace"] = "proj-vision"
    created = gpu_json("submit", "-f", "-", "--pool", "h100", "--model", "resnet", "--data-class", "public",
                       input=json.dumps(manifest))
    assert created["project_slug"] == "vision" and created["kind"] == "job" and created["gpu_units"] == 2
    row = Workload.objects.get(pk=created["id"])
    assert row.manifest["metadata"]["name"] == f"wl-{row.pk}" and row.name == "plain-job"


def test_a_refused_manifest_prints_every_field_path_and_exits_6(signed_in, home, tmp_path):
    manifest = job_manifest(60)
    pod = manifest["spec"]["template"]["spec"]
    pod["containers"][0]["env"] = [{"name": "MASTER_ADDR", "value": "x"}]
    del pod["containers"][0]["resources"]["requests"]["nvidia.com/gpu"]
    pod["hostNetwork"] = True
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(manifest))
    refused = gpu_process("submit", "-f", str(path), *WHERE)
    _, err = refused.communicate(timeout=60)
    assert refused.returncode == 6, err
    assert len(err.strip().splitlines()) == 1 and err.startswith("gpu: manifest: ") and "(HTTP 400)" in err
    for field in ("spec.template.spec.containers[0].env[0].name:",
                  "spec.template.spec.containers[0].resources.requests.nvidia.com/gpu:",
                  "spec.template.spec.hostNetwork:"):
        assert field in err, (field, err)
    # Two documents: the portal's refusal, not the CLI's guess.
    two = gpu("submit", "-f", "-", *WHERE, input=yaml.safe_dump(job_manifest(60)) + "---\n"
              + yaml.safe_dump(job_manifest(60)))
    assert two.exit_code == 6 and "several YAML documents" in two.stderr
    # Where it runs is the API's to require: no pool.
    no_pool = gpu("submit", "-f", str(path), "-p", "vision", "--model", "m", "--data-class", "public")
    assert no_pool.exit_code == 6 and "node_pool:" in no_pool.stderr
    nothing_submitted()


@pytest.mark.parametrize("flags", [["-g", "2"], ["-n", "other"], ["--image", "busybox"], ["-k", "batch"],
                                   ["-e", "A=1"], ["-t", "small-sleep"], ["--", "sleep", "5"],
                                   ["--cpu", "2", "--pods", "3"]])
def test_flags_that_describe_the_pods_do_not_apply_to_a_manifest(signed_in, home, tmp_path, flags):
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(job_manifest(60)))
    refused = gpu("submit", "-f", str(path), *WHERE, *flags)
    assert refused.exit_code == 2, refused.output
    assert refused.stderr.startswith(f"gpu: {path} is a Kubernetes manifest: ") and "do not apply" in refused.stderr
    nothing_submitted()


def test_a_job_file_is_still_a_job_file_and_unreadable_text_is_a_usage_error(signed_in, home, tmp_path):
    spec = tmp_path / "job.yaml"
    spec.write_text("project: vision\nkind: batch\nname: spec-file\nimage: busybox:1.36\nnode_pool: h100\ngpus: 1\n"
                    "labels: {model: resnet50, data_class: public}\n")
    created = gpu_json("submit", "-f", str(spec))
    assert created["kind"] == "batch" and created["name"] == "spec-file"
    broken = gpu("submit", "-f", "-", *WHERE, input="apiVersion: batch/v1\nkind: [Job\n")
    assert broken.exit_code == 2 and broken.stderr.startswith("gpu: cannot read -:")
    # A Kubernetes kind without its apiVersion is a manifest still: the portal names what is missing.
    no_version = gpu("submit", "-f", "-", *WHERE, input="kind: Job\nmetadata: {name: x}\n")
    assert no_version.exit_code == 6 and "apiVersion:" in no_version.stderr
    assert Workload.objects.count() == 1
