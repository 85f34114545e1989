"""`gpu` against a served portal: real HTTP to the live server, the demo organisation reconciled into kubesim, the
real Celery worker and watcher. Commands run in-process through click's runner (its output and exit code), and as
the real console program in a subprocess where it must run alongside the test (logs -f) or prove its exit code."""

from __future__ import annotations

import json
import os
import re
import signal
import stat
import subprocess
import sys
import threading
from importlib import metadata
from pathlib import Path

import pytest
import requests

from apps.workloads.models import Status, Workload
from tests.portal_cli.support import ROOT, gpu, gpu_json, gpu_process
from tests.worker.conftest import wait_for

pytestmark = pytest.mark.slow

SUBMIT = ["-p", "vision", "--image", "busybox:1.36", "--pool", "h100", "-g", "1", "--model", "resnet50",
          "--data-class", "public"]


@pytest.fixture
def permissive_umask():
    """A umask that lets every new file be world-readable: the token file must be 0600 all the same."""
    previous = os.umask(0)
    yield
    os.umask(previous)


def test_login_stores_the_token_for_its_owner_only(home, live_server, org, permissive_umask):
    result = gpu("login", "--url", live_server.url, "--username", "alice", "--password-stdin", "-o", "json",
                 input="demo\n")
    assert result.exit_code == 0, result.output
    stored = Path(json.loads(result.stdout)["config"])
    assert stored == home / "config" / "gpu-portal" / "config.json"
    assert stat.S_IMODE(stored.stat().st_mode) == 0o600 and stat.S_IMODE(stored.parent.stat().st_mode) == 0o700
    token = json.loads(stored.read_text())["token"]
    assert gpu_json("quota") and token  # the stored token signs the next command in
    # A wrong password: the API's message, exit code 6, nothing stored over the good token.
    refused = gpu("login", "--url", live_server.url, "--username", "alice", "--password-stdin", input="nope\n")
    assert refused.exit_code == 6
    assert refused.stderr.strip() == "gpu: Unable to log in with provided credentials. (HTTP 400)"
    assert json.loads(stored.read_text())["token"] == token
    # A token from My tokens works the same; a bad one is refused with the portal's 401 (exit 3).
    assert gpu("login", "--url", live_server.url, "--token", "not-a-token").exit_code == 3
    assert gpu("login", "--url", live_server.url, "--token", token).exit_code == 0


def test_without_credentials_every_command_says_to_log_in(home):
    result = gpu("list")
    assert result.exit_code == 3 and "gpu login" in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_submit_list_status_logs_stop(signed_in, kubesim, celery_worker, watcher, home, tmp_path):
    # From flags: the words after -- are the command.
    created = gpu_json("submit", *SUBMIT, "-n", "cli-flags", "--", "sleep", "30")
    assert created["status"] == "submitting" and created["command"] == ["sleep", "30"]
    assert created["owner"] == "alice" and created["project_slug"] == "vision" and created["gpu_units"] == 1
    # From a job file in the documented format (the submission's fields), with a flag overriding it.
    job = tmp_path / "job.yaml"
    job.write_text("project: vision\nkind: batch\nname: cli-yaml\nimage: busybox:1.36\ncommand: [sleep, '600']\n"
                   "node_pool: h100\ngpus: 1\ncompletions: 2\nparallelism: 1\nenv: {EPOCHS: '3'}\n"
                   "labels: {model: resnet50, data_class: public}\n")
    from_file = gpu_json("submit", "-f", str(job), "--completions", "3")
    assert from_file["kind"] == "batch" and from_file["completions"] == 3
    assert from_file["env"] == [{"name": "EPOCHS", "value": "3"}]

    listed = gpu_json("list")
    assert {row["id"] for row in listed} == {created["id"], from_file["id"]}
    table = gpu("list")
    assert table.exit_code == 0 and "cli-flags" in table.stdout and "cli-yaml" in table.stdout

    wait_for(lambda: Workload.objects.get(pk=created["id"]).k8s_uid)
    kubesim.advance(1)
    wait_for(lambda: Workload.objects.get(pk=created["id"]).status == Status.RUNNING)
    status = gpu("status", str(created["id"]))
    assert status.exit_code == 0 and "running" in status.stdout and "queue position" in status.stdout
    assert gpu_json("status", str(created["id"]))["status"] == "running"

    # The tail: the worker reads it on request; then following prints the lines as they come, to the end.
    def tail():
        answer = gpu_json("logs", str(created["id"]))
        return answer["pods"] and any("kubesim: running sleep 30" in line for line in answer["pods"][0]["lines"])

    wait_for(tail, timeout=30)
    printed = gpu("logs", str(created["id"]))
    assert printed.exit_code == 0 and "kubesim: running sleep 30" in printed.stdout
    follower = gpu_process("logs", str(created["id"]), "-f", "--timeout", "90")
    kubesim.advance(31)
    wait_for(lambda: Workload.objects.get(pk=created["id"]).status == Status.SUCCEEDED)
    out, err = follower.communicate(timeout=90)
    assert follower.returncode == 0, err
    lines = out.splitlines()
    assert "kubesim: running sleep 30" in lines and "kubesim: container main exited with code 0" in lines, out
    assert lines[-1] == "[cli-flags succeeded]" and len(lines) == len(set(lines))  # in order, none repeated

    stopped = gpu_json("stop", str(from_file["id"]))
    assert stopped["status"] == "stopping"
    again = gpu("stop", str(from_file["id"]))  # the worker may have finished the stop meanwhile
    assert again.exit_code == 6 and again.stderr.startswith(
        ("gpu: This workload is stopping; there is nothing to stop.",
         "gpu: This workload is stopped; there is nothing to stop."))


def test_bad_input_gives_the_apis_message_and_an_exit_code(signed_in, home):
    refused = gpu_process("submit", *SUBMIT[:-2], "-n", "Not_A_DNS_Label", "-g", "0")
    _, err = refused.communicate(timeout=60)
    assert refused.returncode == 6
    assert len(err.strip().splitlines()) == 1 and err.startswith("gpu: ") and "(HTTP 400)" in err
    assert "gpus:" in err and "name:" in err and "labels.data_class:" in err  # every refusal, by field
    assert Workload.objects.count() == 0
    missing = gpu("status", "999999")
    assert missing.exit_code == 5 and missing.stderr.strip() == "gpu: No Workload matches the given query. (HTTP 404)"
    assert gpu("status", "resnet").exit_code == 2  # workloads are known by id
    assert gpu("usage", "--month", "2026-13").exit_code == 2
    assert gpu("submit", "-t", "no-such-template", "-p", "vision").exit_code == 5
    viewer = gpu("queue", "no-such-project")
    assert viewer.exit_code == 5 and viewer.stderr.strip() == "gpu: No project 'no-such-project' that you may see."


def test_templates_by_name_usage_and_quota(signed_in, home, live_server, org):
    admin_token = subprocess.run(
        [sys.executable, "-m", "portal_cli", "login", "--url", live_server.url, "--username", "admin",
         "--password-stdin", "-o", "json"], input="demo\n", cwd=ROOT, capture_output=True, text=True,
        env={**os.environ, "XDG_CONFIG_HOME": str(home / "admin")}, check=True)
    admin = json.loads((Path(json.loads(admin_token.stdout)["config"])).read_text())["token"]
    made = requests.post(f"{live_server.url}/api/v1/templates/", timeout=30,
                         headers={"Authorization": f"Token {admin}"},
                         json={"name": "small-sleep", "kind": "training", "values": {
                             "image": "busybox:1.36", "node_pool": "h100", "gpus": 1, "command": "sleep 5",
                             "model_label": "tiny", "data_class": "public", "max_runtime_minutes": 10}})
    assert made.status_code == 201, made.text
    assert gpu_json("templates")[0]["submission"]["max_runtime_seconds"] == 600
    created = gpu_json("submit", "-t", "small-sleep", "-p", "vision", "-n", "from-template", "-g", "2")
    assert created["image"] == "busybox:1.36" and created["command"] == ["sleep", "5"] and created["gpus"] == 2
    assert created["labels"] == {"model": "tiny", "data_class": "public"} and created["max_runtime_seconds"] == 600

    usage = gpu_json("usage")
    assert usage["group_by"] == "project" and usage["start"].startswith(usage["start"][:7])
    csv = gpu("usage", "--csv", "--month", "2026-01")
    assert csv.exit_code == 0 and csv.stdout.splitlines()[0].lower().startswith("project")
    quota = gpu("quota")
    assert quota.exit_code == 0 and "vision" in quota.stdout and "h100" in quota.stdout
    queue = gpu_json("queue", "vision")
    assert [row["id"] for row in queue] == [created["id"]]


def test_status_gives_the_start_forecast_in_words(signed_in, home, org):
    from datetime import timedelta

    from django.utils import timezone

    from apps.org.models import NodePool, PriorityClass, Project
    from apps.workloads.models import ForecastBasis, WorkloadForecast
    from tests.factories import WorkloadFactory

    waiting = WorkloadFactory(project=Project.objects.get(slug="vision"), owner=org["alice"],
                              node_pool=NodePool.objects.get(slug="h100"), status=Status.QUEUED,
                              priority_class=PriorityClass.objects.order_by("value").first())
    now = timezone.now()
    WorkloadForecast.objects.create(workload=waiting, computed_at=now, basis=ForecastBasis.HISTORY,
                                    earliest=now + timedelta(minutes=25, seconds=30),
                                    likely=now + timedelta(minutes=30, seconds=30),
                                    latest=now + timedelta(minutes=40, seconds=30))
    shown = gpu("status", str(waiting.pk))
    assert shown.exit_code == 0, shown.output
    assert "expected start" in shown.stdout and "likely in 31 min (26 min-41 min)" in shown.stdout
    assert gpu_json("status", str(waiting.pk))["forecast"]["basis"] == "history"


def test_the_position_column_counts_from_one_as_the_pages_do(signed_in, home, org):
    """Kueue's 0-based position (what the API gives, documented so in its schema) reads "#1" for the next in line,
    as on the page and in e-mails; JSON keeps the API's own number."""
    from apps.org.models import NodePool, PriorityClass, Project
    from tests.factories import WorkloadFactory

    waiting = WorkloadFactory(project=Project.objects.get(slug="vision"), owner=org["alice"],
                              node_pool=NodePool.objects.get(slug="h100"), status=Status.QUEUED, name="next-in-line",
                              priority_class=PriorityClass.objects.order_by("value").first())
    Workload.objects.filter(pk=waiting.pk).update(queue_position_local=0, queue_position_cluster=2)
    listed = gpu("list")
    assert listed.exit_code == 0, listed.output
    (row,) = [line for line in listed.stdout.splitlines() if "next-in-line" in line]
    assert row.split("│")[8].strip() == "#1", listed.stdout
    shown = gpu("status", str(waiting.pk))
    assert any(line.split("│")[0].strip() == "queue position" and line.split("│")[1].strip() == "#1"
               for line in shown.stdout.splitlines()), shown.stdout
    assert gpu_json("status", str(waiting.pk))["queue_position"] == {"local_queue": 0, "cluster_queue": 2}


def test_status_lists_the_kubernetes_events_of_the_workloads_objects(signed_in, home, org):
    from datetime import UTC, datetime, timedelta

    from apps.org.models import NodePool, Project
    from apps.workloads.observation import ClusterEvent
    from apps.workloads.services import workload_cluster_events_record
    from tests.factories import WorkloadFactory

    waiting = WorkloadFactory(project=Project.objects.get(slug="vision"), owner=org["alice"],
                              node_pool=NodePool.objects.get(slug="h100"), status=Status.ADMITTED)
    start = datetime(2026, 12, 1, tzinfo=UTC)
    message = "0/16 nodes are available: 2 node(s) were unschedulable, 14 node(s) didn't match Pod's node affinity"
    workload_cluster_events_record(events=[
        ClusterEvent(uid=f"u{n}", namespace="proj-vision", object_kind="Pod", object_name=f"wl-{waiting.pk}-{n}-abcde",
                     type="Warning", reason="FailedScheduling", message=message, source="default-scheduler", count=2,
                     first_seen=start, last_seen=start + timedelta(minutes=n)) for n in range(2)])
    shown = gpu("status", str(waiting.pk))
    assert shown.exit_code == 0, shown.output
    events = shown.stdout.split("Events:", 1)[1]
    assert "FailedScheduling" in events and message in events and f"Pod/wl-{waiting.pk}-1-abcde (+1)" in events
    assert " 4 " in events  # two pods, twice each: one line
    assert gpu_json("status", str(waiting.pk))["cluster_events"][0]["count"] == 4


# --- the verbs and options of a command line people script ---------------------------------------------------------


def waiting_workload(org, **fields):
    from apps.org.models import NodePool, PriorityClass, Project
    from tests.factories import WorkloadFactory

    fields = {"project": Project.objects.get(slug="vision"), "owner": org["alice"], "status": Status.QUEUED,
              "node_pool": NodePool.objects.get(slug="h100"),
              "priority_class": PriorityClass.objects.get(name="train"), **fields}
    return WorkloadFactory(**fields)


def test_version_and_shell_completion(home):
    assert gpu("--version").stdout == f"gpu {metadata.version('gpu-portal')}\n"
    for shell in ("bash", "zsh", "fish"):
        script = gpu("completion", shell)
        assert script.exit_code == 0 and "_GPU_COMPLETE" in script.stdout, shell
    assert gpu("completion", "powershell").exit_code == 2
    # The script asks the program itself for the words; the program answers as click's completion does.
    answered = subprocess.run([sys.executable, "-m", "portal_cli"], cwd=ROOT, capture_output=True, text=True,
                              timeout=60, check=True, env={**os.environ, "_GPU_COMPLETE": "bash_complete",
                                                           "COMP_WORDS": "gpu who", "COMP_CWORD": "1"})
    assert answered.stdout.split() == ["plain,whoami"]


def test_whoami_and_logout(signed_in, home):
    shown = gpu("whoami")
    assert shown.exit_code == 0, shown.output
    fields = {line.split("│")[0].strip(): line.split("│")[1].strip() for line in shown.stdout.splitlines()
              if "│" in line}
    assert fields["username"] == "alice" and fields["portal"] == signed_in
    assert "researcher on project vision" in fields["roles"]
    assert gpu_json("whoami")["username"] == "alice"
    stored = home / "config" / "gpu-portal" / "config.json"
    out = gpu("logout")
    assert out.exit_code == 0 and str(stored) in out.stdout and not stored.exists()
    assert gpu("whoami").exit_code == 3 and gpu("list").exit_code == 3  # nothing signs in any more
    again = gpu("logout")
    assert again.exit_code == 0 and again.stdout.startswith("no token was stored")


def test_a_project_of_another_department_is_not_found(signed_in, home):
    for command in (["queue", "forecasting"], ["list", "-p", "forecasting"]):
        result = gpu(*command)
        assert result.exit_code == 5, (command, result.output)
        assert result.stderr.strip() == "gpu: No project 'forecasting' that you may see."
    assert gpu("queue", "vision").exit_code == 0 and gpu("list", "-p", "vision").exit_code == 0


def test_wide_adds_columns(signed_in, home, org):
    waiting_workload(org, name="wide-one")
    narrow, wide = gpu("list"), gpu("list", "-o", "wide")
    assert narrow.exit_code == wide.exit_code == 0
    assert "wide-one" in narrow.stdout and "NAMESPACE" not in narrow.stdout and "FORECAST" not in narrow.stdout
    header = wide.stdout.splitlines()[0]
    assert all(column in header for column in ("ID", "WHY", "NAMESPACE", "PRIORITY", "FORECAST", "SUBMITTED"))
    assert "proj-vision" in wide.stdout
    assert "COHORT" in gpu("queues", "-o", "wide").stdout.splitlines()[0]


def test_why_forecast_and_resubmit_are_verbs(signed_in, home, org):
    from datetime import timedelta

    from django.utils import timezone

    from apps.workloads.models import ForecastBasis, WorkloadForecast

    waiting = waiting_workload(org, name="waits")
    now = timezone.now()
    WorkloadForecast.objects.create(workload=waiting, computed_at=now, basis=ForecastBasis.HISTORY,
                                    earliest=now + timedelta(minutes=25, seconds=30),
                                    likely=now + timedelta(minutes=30, seconds=30),
                                    latest=now + timedelta(minutes=40, seconds=30))
    forecast = gpu("forecast", str(waiting.pk))
    assert forecast.exit_code == 0 and "likely in 31 min (26 min-41 min)" in forecast.stdout, forecast.output
    assert gpu_json("forecast", str(waiting.pk))["forecast"]["basis"] == "history"
    why = gpu_json("why", str(waiting.pk))
    assert why["status"] == "queued" and why["waiting"]["reason"] and why["waiting"]["sentence"]
    shown = gpu("why", str(waiting.pk))
    assert shown.exit_code == 0 and why["waiting"]["sentence"][:40] in shown.stdout.replace("\n", " ")
    running = waiting_workload(org, name="runs", status=Status.RUNNING)
    assert gpu("why", str(running.pk)).stdout == f"runs ({running.pk}) is not waiting: it is running.\n"
    assert gpu("forecast", str(running.pk)).stdout.startswith(f"runs ({running.pk}) is running")
    assert gpu("why", "999999").exit_code == 5 and gpu("forecast", "x").exit_code == 2

    again = gpu_json("resubmit", str(running.pk), "-g", "2", "--", "sleep", "5")
    assert again["resubmitted_from"] == running.pk and again["gpus"] == 2 and again["command"] == ["sleep", "5"]
    assert again["name"] == "runs" and again["status"] == "submitting"
    refused = gpu("resubmit", str(running.pk), "-g", "0")
    assert refused.exit_code == 6 and "gpus:" in refused.stderr


def test_status_prints_a_running_notebooks_connect_address(signed_in, home, org):
    from apps.workloads.models import Kind

    notebook = waiting_workload(org, name="nb", kind=Kind.NOTEBOOK, status=Status.RUNNING,
                                notebook_idle_timeout_minutes=60, notebook_port=8888)
    shown = gpu("status", str(notebook.pk))
    assert shown.exit_code == 0, shown.output
    (line,) = [line for line in shown.stdout.splitlines() if line.split("│")[0].strip() == "connect"]
    assert line.split("│")[1].strip() == f"{signed_in}/workloads/{notebook.pk}/connect/"


class Reader:
    """The lines a process prints, collected as they come."""

    def __init__(self, process: subprocess.Popen) -> None:
        self.lines: list[str] = []
        self.thread = threading.Thread(target=self._read, args=(process,), daemon=True)
        self.thread.start()

    def _read(self, process: subprocess.Popen) -> None:
        for line in process.stdout:
            self.lines.append(line)

    def text(self) -> str:
        return "".join(self.lines)


@pytest.mark.parametrize("command", ["list", "status"])
def test_watch_prints_again_on_change_and_ctrl_c_ends_it_with_0(signed_in, home, org, command):
    workload = waiting_workload(org, name="watched")
    args = ["list", "--watch", "--interval", "0.5"] if command == "list" else [
        "status", str(workload.pk), "-w", "--interval", "0.5"]
    # Ctrl-C as at a terminal: a suite started in the background of a shell inherits SIGINT ignored, and Python
    # then never raises KeyboardInterrupt, so the child gets the default disposition back before it starts.
    watcher = subprocess.Popen([sys.executable, "-m", "portal_cli", *args], cwd=ROOT, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"},
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    reader = Reader(watcher)
    try:
        wait_for(lambda: "queued" in reader.text(), timeout=60, describe=reader.text)
        printed = len(reader.lines)
        Workload.objects.filter(pk=workload.pk).update(status=Status.RUNNING)
        wait_for(lambda: "running" in "".join(reader.lines[printed:]), timeout=60, describe=reader.text)
        before = reader.text()
    finally:
        watcher.send_signal(signal.SIGINT)
        _, err = watcher.communicate(timeout=60)
    assert watcher.returncode == 0, err
    assert err == ""  # no traceback, no "Aborted!"
    # Printed once per change, not once per read (every half second): the queued table, then the running one.
    header = re.compile(r"^ (ID|field) +┃", re.MULTILINE)
    assert len(header.findall(before)) == 2, before


def test_a_fraction_of_a_gpu_from_a_job_file_or_a_flag_on_a_kai_pool(signed_in, home, tmp_path):
    from apps.org.demo import seed_demo_kai_pool

    seed_demo_kai_pool()
    spec = tmp_path / "half.yaml"
    spec.write_text("project: vision\nkind: notebook\nname: half\nimage: jupyter/base-notebook:latest\n"
                    "node_pool: rtx-pro-6000\ngpu_fraction: 0.5\nlabels: {model: m, data_class: public}\n")
    created = gpu_json("submit", "-f", str(spec))
    assert created["gpu_fraction"] == 0.5 and created["gpus"] == 0
    listed = gpu("list").stdout
    row = next((line for line in listed.splitlines() if line.split()[:2] == [str(created["id"]), "half"]), listed)
    assert " 0.5 " in row, listed
    flagged = gpu_json("submit", "-p", "vision", "-k", "notebook", "-n", "quarter", "-i",
                       "jupyter/base-notebook:latest", "--pool", "rtx-pro-6000", "--gpu-fraction", "0.25",
                       "--model", "m", "--data-class", "public")
    assert flagged["gpu_fraction"] == 0.25 and flagged["gpus"] == 0  # the flag asks for no whole GPU
    refused = gpu("submit", *SUBMIT, "-n", "x", "--pods", "2", "--gpu-fraction", "0.5")
    assert refused.exit_code == 6 and "gpu_fraction:" in refused.stderr and "gpus:" in refused.stderr  # both given


def test_a_policy_refuses_a_cli_submit_as_it_does_the_api_every_rule_with_its_scope(signed_in, home, org):
    """Policies apply to the CLI alike (it submits through the API): every violation in one refusal, each naming the
    policy's scope, and nothing created."""
    from apps.org import services as org_services
    from apps.org.models import Department

    org_services.policy_create(actor=org["admin"], department=Department.objects.get(slug="research"),
                               max_gpus_per_workload=2, allowed_images=["nvcr.io/*"])
    refused = gpu_process("submit", *SUBMIT[:6], "-g", "4", *SUBMIT[8:], "-n", "too-big")
    _, err = refused.communicate(timeout=60)
    assert refused.returncode == 6 and "(HTTP 400)" in err
    assert "gpus: The Research department's policy allows at most 2 GPUs per workload" in err
    assert "The Research department's policy allows images matching nvcr.io/* only; busybox:1.36 matches none." in err
    assert Workload.objects.count() == 0
