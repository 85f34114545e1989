"""The workloads API: submission and its refusals, the scoped list and detail, stop, the access matrix, query counts.

Refusals come from `workload_submit` (the same messages as the forms) keyed by the API's field names; a refused
submission saves nothing and enqueues nothing. Accepted ones enqueue exactly one submit task after commit: the
tests capture the on-commit callbacks without running them and read which task each would send.
"""

from __future__ import annotations

import inspect
from decimal import Decimal
from typing import Any

import pytest

from tests.access_matrix import USERS, as_every_user, fill_ids, matrix_params
from tests.api_support import call, demo_ids, personal_token

SUBMIT_TASK = "worker.tasks.workload_submit"
STOP_TASK = "worker.tasks.workload_stop"

GOOD: dict[str, Any] = {
    "project": "vision", "kind": "training", "name": "resnet-sweep-3", "image": "nvcr.io/nvidia/pytorch:24.05-py3",
    "command": ["python", "train.py"], "args": ["--epochs", "3"], "env": {"EPOCHS": "3"}, "node_pool": "h100",
    "gpus": 2, "cpu": "4", "memory": "16Gi", "pods": 2, "labels": {"model": "resnet50", "data_class": "public"},
}


def body(**changes: Any) -> dict[str, Any]:
    data = {**GOOD, **changes}
    return {key: value for key, value in data.items() if value is not DROP}


DROP = object()


def enqueued(callbacks: list) -> list[tuple[str, tuple]]:
    """(task name, args) of each captured `enqueue_on_commit` callback, without running it."""
    found = []
    for callback in callbacks:
        closure = inspect.getclosurevars(callback).nonlocals
        found.append((closure["name"], tuple(closure["args"])))
    return found


def workload_rows() -> tuple[int, int]:
    from apps.workloads.models import Workload, WorkloadEvent

    return Workload.objects.count(), WorkloadEvent.objects.count()


def submit_as(user: Any, *, project: str = "vision", name: str = "run", pool: str = "h100", **extra: Any):
    """A workload made through the service (the way the forms and the API do)."""
    from apps.org.models import NodePool, Project
    from apps.workloads import services

    return services.workload_submit(
        actor=user, project=Project.objects.get(slug=project), kind=extra.pop("kind", "training"), name=name,
        image="pytorch/pytorch:2.4.0", node_pool=NodePool.objects.get(slug=pool), gpus=extra.pop("gpus", 1),
        model_label="resnet", data_class="public", **extra)


@pytest.fixture
def spare_pool(demo):
    from apps.org import services

    return services.node_pool_create(actor=demo["admin"], slug="spare", name="Spare", gpu_resource="nvidia.com/gpu",
                                     capacity=8)


# --- refusals ----------------------------------------------------------------------------------------------------

# (id, body changes, path to the error list, a fragment of the message)
REFUSALS: list[tuple[str, dict[str, Any], tuple[str, ...], str]] = [
    ("pool without quota", {"node_pool": "spare"}, ("node_pool",), "Vision has no quota on Spare"),
    ("more than the limit", {"gpus": 4, "pods": 3}, ("gpus",),
     "asks for 12 H100 80GB units but Vision may use at most 8 there"),
    ("non-preemptible beyond deserved", {"gpus": 3, "pods": 2, "preemptible": False}, ("preemptible",),
     "Non-preemptible work must fit in Vision's deserved quota on H100 80GB (4 units) and this asks for 6"),
    ("invalid image", {"image": "Not An Image!"}, ("image",), "is not a valid image reference"),
    ("image with upper case path", {"image": "nvcr.io/NVIDIA/pytorch"}, ("image",), "is not a valid image reference"),
    ("invalid name", {"name": "My_Run"}, ("name",), "Kubernetes DNS-1123 label"),
    ("name too long for Kubernetes", {"name": "a" * 64}, ("name",), "At most 63 characters"),
    ("name too long for the portal", {"name": "a" * 50}, ("name",), "at most 40 characters"),
    ("invalid env name", {"env": {"1BAD": "x"}}, ("env",), "'1BAD' is not a valid environment variable name"),
    ("invalid env name in a list", {"env": [{"name": "A B", "value": "x"}]}, ("env",),
     "'A B' is not a valid environment variable name"),
    ("reserved env name", {"env": {"PORTAL_WORKLOAD": "1"}}, ("env",), "set by the portal"),
    ("env name the launcher wiring sets", {"env": {"MASTER_ADDR": "evil"}}, ("env",),
     "MASTER_ADDR is set by the portal"),
    ("env rank", {"env": [{"name": "RANK", "value": "0"}]}, ("env",), "RANK is set by the portal"),
    ("notebook token in env", {"env": {"JUPYTER_TOKEN": "x"}}, ("env",), "JUPYTER_TOKEN is set by the portal"),
    ("env value of 300 KiB", {"env": {"BIG": "x" * 300 * 1024}}, ("env",),
     "The value of BIG is 300 KiB; at most 256 KiB per value"),
    ("env of 1.2 MiB in all", {"env": {f"PART{i}": "x" * 250 * 1024 for i in range(5)}}, ("env",),
     "at most 1024 KiB in all"),
    ("integer env value", {"env": {"EPOCHS": 10}}, ("env",), 'must be a string: quote it, e.g. "10"'),
    ("float env value in a list", {"env": [{"name": "LR", "value": 0.1}]}, ("env",), "must be a string"),
    ("zero cpu", {"cpu": 0}, ("cpu",), "Give a positive number of CPU cores"),
    ("negative zero cpu", {"cpu": "-0"}, ("cpu",), "Give a positive number of CPU cores"),
    ("zero millicores", {"cpu": "0m"}, ("cpu",), "Give a positive number of CPU cores"),
    ("zero memory", {"memory": "0"}, ("memory",), "Give a positive amount of memory"),
    ("memory of a fraction of a byte", {"memory": "0.4Ki"}, ("memory",), "a whole number of bytes"),
    ("fractional gpus", {"gpus": 1.5}, ("gpus",), "A valid integer is required."),
    ("gpus as a float", {"gpus": 1.0}, ("gpus",), "A valid integer is required."),
    ("gpus as a decimal string", {"gpus": "1.0"}, ("gpus",), "A valid integer is required."),
    ("empty command", {"command": [""]}, ("command",), "The command's first entry is the program to run"),
    ("invalid label value", {"labels": {"model": "res net!", "data_class": "public"}}, ("labels", "model"),
     "is not a valid Kubernetes label value"),
    ("label value too long", {"labels": {"model": "resnet", "data_class": "x" * 64}}, ("labels", "data_class"),
     "is not a valid Kubernetes label value"),
    ("missing audit labels", {"labels": DROP}, ("labels",), "This field is required."),
    ("missing model label", {"labels": {"data_class": "public"}}, ("labels", "model"),
     "The model audit label is required."),
    ("blank data class label", {"labels": {"model": "resnet", "data_class": ""}}, ("labels", "data_class"),
     "The data class audit label is required."),
    ("unknown label", {"labels": {"model": "resnet", "data_class": "public", "team": "x"}}, ("labels", "team"),
     "Only the model and data_class labels"),
    ("absurd gpus", {"gpus": 1000}, ("gpus",), "less than or equal to 64"),
    ("no gpus", {"gpus": 0}, ("gpus",), "Ask for at least 1 GPU, or for a fraction of one"),
    ("absurd pods", {"pods": 100000}, ("pods",), "At most 512 pods."),
    ("negative cpu", {"cpu": -1}, ("cpu",), "greater than or equal to 0"),
    ("absurd memory", {"memory": "100Ti"}, ("memory",), "less than or equal to 4096"),
    ("memory that is not a quantity", {"memory": "lots"}, ("memory",), "Kubernetes quantity"),
    ("cpu that is not a quantity", {"cpu": "4Gi"}, ("cpu",), "Kubernetes quantity"),
    ("absurd runtime", {"max_runtime_seconds": 10**9}, ("max_runtime_seconds",), "less than or equal to"),
    ("notebook with several pods", {"kind": "notebook", "pods": 2}, ("pods",), "A notebook runs in exactly one pod."),
    ("batch parallelism beyond completions", {"kind": "batch", "pods": 1, "completions": 2, "parallelism": 4},
     ("parallelism",), "Parallelism cannot exceed the number of completions."),
    ("batch with pods", {"kind": "batch", "pods": 4}, ("pods",), "Only training runs several pods"),
    ("notebook port out of range", {"kind": "notebook", "pods": 1, "port": 70000}, ("port",),
     "less than or equal to 65535"),
    ("notebook idle timeout too short", {"kind": "notebook", "pods": 1, "idle_timeout_minutes": 1},
     ("idle_timeout_minutes",), "greater than or equal to 5"),
    ("unknown kind", {"kind": "service"}, ("kind",), '"service" is not a valid choice.'),
    ("unknown pool", {"node_pool": "tpu"}, ("node_pool",), "Object with slug=tpu does not exist."),
    ("unknown priority class", {"priority_class": "urgent"}, ("priority_class",), "does not exist"),
    ("command that is not a list", {"command": "python train.py"}, ("command",), "Expected a list of items"),
    ("env that is neither list nor object", {"env": "A=1"}, ("env",), "Give a list of"),
    ("misspelt field", {"preemtible": False}, ("preemtible",), "Unknown field."),
    ("resubmitting an unknown workload", {"resubmitted_from": 999999}, ("resubmitted_from",), "does not exist"),
    ("project unknown", {"project": "robotics"}, ("project",), 'Project "robotics" does not exist.'),
    ("project missing", {"project": DROP}, ("project",), "This field is required."),
]


def _messages(errors: Any, path: tuple[str, ...]) -> list[str]:
    for key in path:
        assert key in errors, f"no error at {path}: {errors}"
        errors = errors[key]
    return errors


@pytest.mark.parametrize(("changes", "path", "fragment"),
                         [pytest.param(changes, path, fragment, id=name) for name, changes, path, fragment in REFUSALS])
def test_refusal_says_why_and_saves_and_enqueues_nothing(client_for, spare_pool, django_capture_on_commit_callbacks,
                                                         changes, path, fragment):
    before = workload_rows()
    with django_capture_on_commit_callbacks() as callbacks:
        response = call(client_for("alice"), "POST", "workloads/", body(**changes))
    assert response.status_code == 400, response.content
    messages = _messages(response.json(), path)
    assert any(fragment in message for message in messages), messages
    assert workload_rows() == before
    assert callbacks == []


def test_refused_submission_is_the_same_for_a_project_named_by_id(client_for, demo,
                                                                  django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks() as callbacks:
        response = call(client_for("alice"), "POST", "workloads/", body(project=demo_ids()["vision"], gpus=9))
    assert response.status_code == 400
    assert "at most 8" in response.json()["gpus"][0]
    assert callbacks == [] and workload_rows() == (0, 0)


def test_a_project_the_user_cannot_see_does_not_exist(client_for, demo, django_capture_on_commit_callbacks):
    ids = demo_ids()
    for project in ("forecasting", ids["forecasting"], 999999):
        with django_capture_on_commit_callbacks() as callbacks:
            response = call(client_for("alice"), "POST", "workloads/", body(project=project))
        assert response.status_code == 400
        assert response.json() == {"project": [f'Project "{project}" does not exist.']}
        assert callbacks == []
    assert workload_rows() == (0, 0)


def test_a_project_seen_but_not_submittable_is_403_even_with_a_bad_body(client_for, demo):
    from apps.accounts.services import role_binding_create
    from apps.org.models import Project

    # alice also views nlp: she sees it but may not submit there
    role_binding_create(actor=demo["admin"], role="viewer", user=demo["alice"], project=Project.objects.get(slug="nlp"))
    response = call(client_for("alice"), "POST", "workloads/", body(project="nlp", name="Bad_Name", gpus=1000))
    assert response.status_code == 403
    assert response.json() == {"detail": "You may not submit work in this project."}
    response = call(client_for("viewer"), "POST", "workloads/", body())
    assert response.status_code == 403
    assert response.json() == {"detail": "You may not submit work in any project."}
    assert workload_rows() == (0, 0)


# --- accepted submissions ---------------------------------------------------------------------------------------


def test_good_submission_is_201_submitting_with_the_row_and_one_task(client_for, demo,
                                                                     django_capture_on_commit_callbacks):
    from apps.workloads.models import Workload

    with django_capture_on_commit_callbacks() as callbacks:
        response = call(client_for("alice"), "POST", "workloads/", GOOD)
    assert response.status_code == 201, response.content
    data = response.json()
    workload = Workload.objects.get()
    assert data["id"] == workload.pk
    assert data["status"] == "submitting" == workload.status
    assert enqueued(callbacks) == [(SUBMIT_TASK, (workload.pk,))]
    assert workload.owner == demo["alice"] and workload.project.slug == "vision" and workload.node_pool.slug == "h100"
    assert (workload.kind, workload.name, workload.image) == ("training", "resnet-sweep-3",
                                                              "nvcr.io/nvidia/pytorch:24.05-py3")
    assert workload.command == ["python", "train.py"] and workload.args == ["--epochs", "3"]
    assert workload.env == [{"name": "EPOCHS", "value": "3"}]
    assert (workload.gpus, workload.pods, workload.cpu, workload.memory_gib) == (2, 2, Decimal(4), Decimal(16))
    assert (workload.model_label, workload.data_class) == ("resnet50", "public")
    assert workload.preemptible is True and workload.priority_class.name == "train"  # the project's default
    assert data["project"] == workload.project_id and data["project_slug"] == "vision"
    assert data["namespace"] == workload.project.namespace
    assert data["owner"] == "alice" and data["owner_id"] == demo["alice"].pk
    assert data["node_pool"] == "h100" and data["priority_class"] == "train" and data["preemptible"] is True
    assert data["env"] == [{"name": "EPOCHS", "value": "3"}]
    assert data["labels"] == {"model": "resnet50", "data_class": "public"}
    assert (data["gpus"], data["pods"], data["pod_count"], data["gpu_units"]) == (2, 2, 2, 4)
    assert (data["cpu"], data["memory_gib"]) == ("4.000", "16.00")
    assert data["job_name"] == f"wl-{workload.pk}" and data["k8s_uid"] == "" and data["manifest"] is None
    assert data["queue_name"] == "elastic-h100"
    assert data["status_reason"] == "" and data["created_at"] and data["submitted_at"] is None
    assert data["idle_timeout_minutes"] is None and data["port"] is None
    [event] = data["events"]
    assert event["from"] == "" and event["to"] == "submitting" and event["reason"] == "Submitted"
    assert event["actor"] == "alice" and "elastic-h100" in event["message"] and event["at"]


def test_notebook_and_batch_submissions(client_for, demo, django_capture_on_commit_callbacks):
    client = client_for("alice")
    with django_capture_on_commit_callbacks() as callbacks:
        notebook = call(client, "POST", "workloads/", body(kind="notebook", name="nb", pods=DROP, gpus=1, env=[],
                                                           node_pool="l40s-shared", memory="512Mi", cpu="500m"))
        batch = call(client, "POST", "workloads/", body(kind="batch", name="etl", pods=DROP, completions=8,
                                                        parallelism=2, gpus=1, memory=24, max_runtime_seconds=3600))
    assert notebook.status_code == 201, notebook.content
    assert batch.status_code == 201, batch.content
    notebook, batch = notebook.json(), batch.json()
    assert (notebook["port"], notebook["idle_timeout_minutes"]) == (8888, 120)  # the service's defaults
    assert (notebook["cpu"], notebook["memory_gib"], notebook["env"]) == ("0.500", "0.50", [])
    assert (batch["completions"], batch["parallelism"], batch["pod_count"], batch["gpu_units"]) == (8, 2, 2, 2)
    assert (batch["memory_gib"], batch["max_runtime_seconds"]) == ("24.00", 3600)
    assert enqueued(callbacks) == [(SUBMIT_TASK, (notebook["id"],)), (SUBMIT_TASK, (batch["id"],))]



@pytest.mark.parametrize("changes", [
    {},
    {"kind": "notebook", "name": "nb", "pods": DROP, "gpus": 1, "env": [], "node_pool": "l40s-shared",
     "memory": "512Mi", "cpu": "500m", "shm": "0.25"},
    {"kind": "batch", "name": "etl", "pods": DROP, "completions": 8, "parallelism": 2, "gpus": 1, "memory": 24,
     "max_runtime_seconds": 3600, "preemptible": False},
    {"attachments": True},
], ids=["training", "notebook", "batch", "attachments"])
def test_a_submissions_answer_is_the_detail_read_back(client_for, demo, changes):
    """The 201 is built from the row the service wrote, not read back: it must equal the workload's detail."""
    from apps.org.models import Project
    from apps.org.services import data_source_create
    from apps.workloads import services

    changes = dict(changes)
    if changes.pop("attachments", False):
        vision = Project.objects.get(slug="vision")
        for name in ("zeta", "alpha"):  # answered in the models' order, whatever the order asked
            data_source_create(actor=demo["admin"], project=vision, name=name, kind="pvc", claim_name=name,
                               mount_path=f"/data/{name}")
            services.credential_create(actor=demo["alice"], project=vision, name=f"{name}-key",
                                       values={f"{name.upper()}_KEY": "secret"})
        changes.update(data_sources=["zeta", "alpha"], credentials=["zeta-key", "alpha-key"])
    client = client_for("alice")
    created = call(client, "POST", "workloads/", body(**changes))
    assert created.status_code == 201, created.content
    read = call(client, "GET", f"workloads/{created.json()['id']}/")
    assert created.json() == read.json()
    if changes.get("data_sources"):
        assert created.json()["data_sources"] == ["alpha", "zeta"]


def test_priority_class_defaults_follow_the_preemptibility_asked(client_for, demo):
    client = client_for("alice")
    guaranteed = call(client, "POST", "workloads/", body(name="a", preemptible=False, gpus=1, pods=1)).json()
    assert (guaranteed["priority_class"], guaranteed["preemptible"], guaranteed["queue_name"]) == (
        "build", False, "guaranteed-h100")
    named = call(client, "POST", "workloads/", body(name="b", priority_class="inference", gpus=1, pods=1)).json()
    assert (named["priority_class"], named["preemptible"]) == ("inference", False)  # the class decides


@pytest.mark.parametrize(("memory", "gib"), [
    ("16Gi", "16.00"), ("512Mi", "0.50"), ("100Mi", "0.10"), ("1.5Gi", "1.50"), ("16G", "14.91"), (24, "24.00"),
    ("8", "8.00"), (0.25, "0.25"), ("1Ti", "1024.00"),
])
def test_memory_accepts_quantities_and_gib(client_for, demo, memory, gib):
    response = call(client_for("alice"), "POST", "workloads/", body(memory=memory))
    assert response.status_code == 201, response.content
    assert response.json()["memory_gib"] == gib


def test_env_accepts_a_list_or_an_object_of_strings(client_for, demo):
    """Values are strings, as in Kubernetes: a number or a boolean is refused with the quoted form to send."""
    client = client_for("alice")
    as_list = call(client, "POST", "workloads/", body(name="a", env=[{"name": "LR", "value": "0.1"}]))
    as_object = call(client, "POST", "workloads/", body(name="b", env={"EPOCHS": "10", "LR": "0.1", "EMPTY": ""}))
    assert as_list.json()["env"] == [{"name": "LR", "value": "0.1"}]
    assert as_object.json()["env"] == [{"name": "EPOCHS", "value": "10"}, {"name": "LR", "value": "0.1"},
                                       {"name": "EMPTY", "value": ""}]
    refused = call(client, "POST", "workloads/", body(name="c", env={"FLAG": True, "EPOCHS": 10}))
    assert refused.status_code == 400 and refused.json() == {"env": [
        'The value of FLAG must be a string: quote it, e.g. "true".',
        'The value of EPOCHS must be a string: quote it, e.g. "10".']}


def test_submit_again_records_the_source_only_when_visible(client_for, demo):
    bobs = submit_as(demo["bob"], project="nlp", name="bob-run")
    alices = submit_as(demo["alice"], name="first")
    again = call(client_for("alice"), "POST", "workloads/", body(name="second", resubmitted_from=alices.pk))
    assert again.status_code == 201 and again.json()["resubmitted_from"] == alices.pk
    hidden = call(client_for("alice"), "POST", "workloads/", body(name="third", resubmitted_from=bobs.pk))
    assert hidden.status_code == 400
    assert hidden.json() == {"resubmitted_from": [f'Invalid pk "{bobs.pk}" - object does not exist.']}


def test_token_authentication_submits(client, demo, django_capture_on_commit_callbacks):
    token = personal_token(demo["alice"])
    with django_capture_on_commit_callbacks() as callbacks:
        response = call(client, "POST", "workloads/", GOOD, HTTP_AUTHORIZATION=f"Token {token}")
    assert response.status_code == 201, response.content
    assert response.json()["owner"] == "alice"
    assert enqueued(callbacks) == [(SUBMIT_TASK, (response.json()["id"],))]
    refused = call(client, "POST", "workloads/", GOOD, HTTP_AUTHORIZATION="Token wrong")
    # 401 with a challenge since personal tokens: a bad, expired or revoked token is an authentication
    # failure of the token scheme, not a session without permission.
    assert refused.status_code == 401 and refused.json() == {"detail": "Invalid token."}
    assert refused["WWW-Authenticate"] == 'Token realm="api"'



def test_a_submission_costs_a_fixed_number_of_queries(client, demo, django_assert_num_queries):
    """The API's busiest write, pinned: the token with its user, the grants, the project (once, for the 403 check
    and the validation, with its default priority class), the pool, the policies, the pool's quotas; then the
    transaction (savepoint, the row, its job name, its event, its intent, its audit row, release). Nothing is read
    back."""
    token = personal_token(demo["alice"])
    for name in ("warm", "pinned"):
        with django_assert_num_queries(13):
            response = call(client, "POST", "workloads/", body(name=name), HTTP_AUTHORIZATION=f"Token {token}")
        assert response.status_code == 201, response.content


@pytest.mark.parametrize(("username", "offers_post"), [("alice", True), ("lead", True), ("viewer", False)])
def test_options_offers_the_submission_form_only_to_submitters(client_for, demo, username, offers_post):
    response = client_for(username).options("/api/v1/workloads/")
    assert response.status_code == 200
    actions = response.json().get("actions", {})
    assert ("POST" in actions) is offers_post
    if offers_post:
        assert {"project", "kind", "labels", "memory", "env"} <= set(actions["POST"])


def test_anonymous_is_refused(client, db):
    assert call(client, "GET", "workloads/").status_code == 401
    assert call(client, "POST", "workloads/", GOOD).status_code == 401
    assert call(client, "POST", "workloads/1/stop/").status_code == 401


# --- list, detail, filters --------------------------------------------------------------------------------------


@pytest.fixture
def workloads(demo) -> dict[str, int]:
    """One live workload per researcher, plus a finished one of alice's."""
    from apps.workloads import services

    alice = submit_as(demo["alice"], name="alice-run")
    done = submit_as(demo["alice"], name="alice-done", kind="notebook", pool="l40s-shared")
    services.workload_stop(actor=demo["alice"], workload=done)
    services.workload_mark_stopped(workload=done, message="Job deleted")
    bob = submit_as(demo["bob"], project="nlp", name="bob-run")
    carol = submit_as(demo["carol"], project="forecasting", name="carol-run", kind="batch", completions=4,
                      parallelism=2)
    return {"wl_alice": alice.pk, "wl_done": done.pk, "wl_bob": bob.pk, "wl_carol": carol.pk}


@pytest.mark.parametrize(("username", "visible"), [
    ("admin", {"alice-run", "alice-done", "bob-run", "carol-run"}),
    ("deptadmin", {"alice-run", "alice-done", "bob-run"}),
    ("lead", {"alice-run", "alice-done", "bob-run"}),
    ("alice", {"alice-run", "alice-done"}),
    ("bob", {"bob-run"}),
    ("carol", {"carol-run"}),
    ("viewer", {"alice-run", "alice-done", "bob-run", "carol-run"}),
])
def test_list_shows_only_the_scope(client_for, workloads, username, visible):
    response = call(client_for(username), "GET", "workloads/")
    assert response.status_code == 200
    data = response.json()
    assert {row["name"] for row in data["results"]} == visible
    assert data["count"] == len(visible)
    assert "events" not in data["results"][0] and "manifest" not in data["results"][0]


def test_own_workloads_stay_visible_after_leaving_the_project(client_for, demo, workloads):
    from apps.accounts.models import RoleBinding

    RoleBinding.objects.filter(user=demo["alice"]).delete()
    client = client_for("alice")
    assert {row["name"] for row in call(client, "GET", "workloads/").json()["results"]} == {"alice-run", "alice-done"}
    assert call(client, "GET", f"workloads/{workloads['wl_alice']}/").status_code == 200
    # ... but without a role she can no longer stop it
    assert call(client, "POST", f"workloads/{workloads['wl_alice']}/stop/").status_code == 403


def test_list_filters(client_for, demo, workloads):
    ids = demo_ids()
    client = client_for("admin")

    def names(query: str) -> set[str]:
        response = call(client, "GET", "workloads/" + query)
        assert response.status_code == 200, response.content
        return {row["name"] for row in response.json()["results"]}

    assert names("?project=vision") == {"alice-run", "alice-done"}
    assert names(f"?project={ids['nlp']}") == {"bob-run"}
    assert names("?status=stopped") == {"alice-done"}
    assert names("?status=submitting,stopped") == {"alice-run", "alice-done", "bob-run", "carol-run"}
    assert names("?status=live") == {"alice-run", "bob-run", "carol-run"}
    assert names("?status=live,stopped&owner=alice") == {"alice-run", "alice-done"}
    assert names("?kind=batch") == {"carol-run"}
    assert names("?kind=notebook,batch") == {"alice-done", "carol-run"}
    assert names("?owner=bob") == {"bob-run"}
    assert names(f"?owner={demo['carol'].pk}") == {"carol-run"}
    assert names("?project=vision&status=submitting&kind=training&owner=alice") == {"alice-run"}
    assert names("?project=forecasting&owner=alice") == set()
    assert names("?limit=2")  # paginated
    page = call(client, "GET", "workloads/?limit=1&offset=1").json()
    assert page["count"] == 4 and len(page["results"]) == 1 and page["next"] and page["previous"]
    refused = call(client, "GET", "workloads/?status=sleeping")
    assert refused.status_code == 400 and "Unknown status sleeping" in refused.json()["status"][0]
    assert call(client, "GET", "workloads/?kind=service").status_code == 400
    # a filter never widens the scope: a project the user cannot see is not a valid choice, like an unknown one
    unseen = call(client_for("bob"), "GET", "workloads/?project=vision")
    assert unseen.status_code == 400 and "results" not in unseen.json()
    assert unseen.json() == call(client_for("bob"), "GET", "workloads/?project=no-such-project").json() == {
        "project": ["Select a valid choice. That choice is not one of the available choices."]}


def test_detail_has_status_events_and_manifest(client_for, demo, workloads):
    from apps.workloads import services
    from apps.workloads.models import Workload

    workload = Workload.objects.get(pk=workloads["wl_alice"])
    services.workload_mark_submitted(workload=workload, uid="0f9e-uid", manifest={"kind": "Job"})
    data = call(client_for("lead"), "GET", f"workloads/{workload.pk}/").json()
    assert (data["status"], data["status_reason"], data["k8s_uid"]) == ("queued", "Created", "0f9e-uid")
    assert "waiting for Kueue" in data["status_message"]
    assert data["manifest"] == {"kind": "Job"} and data["job_name"] == f"wl-{workload.pk}"
    assert data["submitted_at"] and data["gpu_units"] == 1
    assert [(event["from"], event["to"], event["reason"]) for event in data["events"]] == [
        ("", "submitting", "Submitted"), ("submitting", "queued", "Created")]
    assert data["events"][1]["actor"] is None  # the worker, not a person
    assert set(data["events"][0]) == {"at", "from", "to", "reason", "message", "actor"}


# --- stop --------------------------------------------------------------------------------------------------------


def test_owner_stops_own_workload(client_for, workloads, django_capture_on_commit_callbacks):
    from apps.core.models import AuditEvent

    audits = AuditEvent.objects.count()
    with django_capture_on_commit_callbacks() as callbacks:
        response = call(client_for("alice"), "POST", f"workloads/{workloads['wl_alice']}/stop/")
    assert response.status_code == 202, response.content
    data = response.json()
    assert data["status"] == "stopping" and data["stop_requested_by"] == "alice"
    assert data["events"][-1]["reason"] == "StopRequested" and data["events"][-1]["to"] == "stopping"
    assert enqueued(callbacks) == [(STOP_TASK, (workloads["wl_alice"],))]
    stopped = AuditEvent.objects.filter(action="workload.stop").latest("id")  # your own stop is audited too
    assert AuditEvent.objects.count() == audits + 1 and stopped.actor.username == "alice"
    assert stopped.object_id == str(workloads["wl_alice"]) and stopped.after == {"status": "stopping", "bulk": False}


def test_lead_stops_alices_workload_and_it_is_audited(client_for, workloads, django_capture_on_commit_callbacks):
    from apps.core.models import AuditEvent

    with django_capture_on_commit_callbacks() as callbacks:
        response = call(client_for("lead"), "POST", f"workloads/{workloads['wl_alice']}/stop/")
    assert response.status_code == 202
    assert response.json()["status"] == "stopping" and response.json()["stop_requested_by"] == "lead"
    assert enqueued(callbacks) == [(STOP_TASK, (workloads["wl_alice"],))]
    assert AuditEvent.objects.filter(action="workload.stop", actor__username="lead").count() == 1


def test_nothing_to_stop_is_400(client_for, workloads, django_capture_on_commit_callbacks):
    client = client_for("alice")
    with django_capture_on_commit_callbacks() as callbacks:
        done = call(client, "POST", f"workloads/{workloads['wl_done']}/stop/")
        assert call(client, "POST", f"workloads/{workloads['wl_alice']}/stop/").status_code == 202
        again = call(client, "POST", f"workloads/{workloads['wl_alice']}/stop/")
    assert done.status_code == 400
    assert done.json() == {"non_field_errors": ["This workload is stopped; there is nothing to stop."]}
    assert again.status_code == 400 and "stopping; there is nothing to stop" in again.json()["non_field_errors"][0]
    assert len(callbacks) == 1


def test_stop_refused_changes_nothing(client_for, workloads, django_capture_on_commit_callbacks):
    from apps.workloads.models import Workload

    with django_capture_on_commit_callbacks() as callbacks:
        viewer = call(client_for("viewer"), "POST", f"workloads/{workloads['wl_alice']}/stop/")
        bob = call(client_for("bob"), "POST", f"workloads/{workloads['wl_alice']}/stop/")
    assert viewer.status_code == 403 and viewer.json() == {"detail": "You may not stop this workload."}
    assert bob.status_code == 404
    assert Workload.objects.get(pk=workloads["wl_alice"]).status == "submitting"
    assert callbacks == []


# --- the access matrix ------------------------------------------------------------------------------------------

VISION = {**GOOD, "name": "matrix", "gpus": 1, "pods": 1}
FORECASTING = {**VISION, "project": "forecasting"}

# (id, method, path, body) -> codes for admin, deptadmin, lead, alice, bob, carol, viewer
MATRIX: list[tuple[str, str, str, Any, tuple[int, ...]]] = [
    ("list", "GET", "workloads/", None, (200, 200, 200, 200, 200, 200, 200)),
    ("alice's", "GET", "workloads/{wl_alice}/", None, (200, 200, 200, 200, 404, 404, 200)),
    ("bob's", "GET", "workloads/{wl_bob}/", None, (200, 200, 200, 404, 200, 404, 200)),
    ("carol's", "GET", "workloads/{wl_carol}/", None, (200, 404, 404, 404, 404, 200, 200)),
    ("missing", "GET", "workloads/999999/", None, (404, 404, 404, 404, 404, 404, 404)),
    ("submit in vision", "POST", "workloads/", VISION, (201, 201, 201, 201, 400, 400, 403)),
    ("submit in vision by id", "POST", "workloads/", {**VISION, "project": "{vision}"},
     (201, 201, 201, 201, 400, 400, 403)),
    ("submit in forecasting", "POST", "workloads/", FORECASTING, (201, 400, 400, 400, 400, 201, 403)),
    ("stop alice's", "POST", "workloads/{wl_alice}/stop/", None, (202, 202, 202, 202, 404, 404, 403)),
    ("stop bob's", "POST", "workloads/{wl_bob}/stop/", None, (202, 202, 202, 404, 202, 404, 403)),
    ("stop carol's", "POST", "workloads/{wl_carol}/stop/", None, (202, 404, 404, 404, 404, 202, 403)),
    ("stop a stopped one", "POST", "workloads/{wl_done}/stop/", None, (400, 400, 400, 400, 404, 404, 403)),
    # workloads are not edited or deleted through the API (stop them; resubmit to change)
    ("no put", "PUT", "workloads/{wl_alice}/", VISION, (405, 405, 405, 405, 405, 405, 405)),
    ("no patch", "PATCH", "workloads/{wl_alice}/", {"name": "x"}, (405, 405, 405, 405, 405, 405, 405)),
    ("no delete", "DELETE", "workloads/{wl_alice}/", None, (405, 405, 405, 405, 405, 405, 405)),
]


def _state() -> list[tuple]:
    from apps.core.models import AuditEvent
    from apps.workloads.models import Workload, WorkloadEvent

    return [*Workload.objects.order_by("pk").values_list("pk", "status", "stop_requested_by"),
            WorkloadEvent.objects.count(), AuditEvent.objects.count()]


@pytest.mark.parametrize(("method", "path", "data", "expected"), matrix_params(MATRIX))
def test_access_matrix(client_for, workloads, django_capture_on_commit_callbacks, method, path, data, expected):
    ids = {**demo_ids(), **workloads}
    url, data = path.format(**ids), fill_ids(data, ids)
    clients = {username: client_for(username) for username in USERS}
    outcomes = as_every_user(lambda username: call(clients[username], method, url, data), _state,
                             django_capture_on_commit_callbacks)
    for username, (code, callbacks) in outcomes.items():
        if code >= 400:
            assert callbacks == [], f"{username}: a refused {method} enqueued something"
        elif method == "POST":
            assert len(callbacks) == 1, f"{username}: an accepted {method} enqueued {len(callbacks)} tasks"
    assert {username: code for username, (code, _) in outcomes.items()} == expected


# --- query counts -------------------------------------------------------------------------------------------------


def grow(demo: dict[str, Any], count: int = 12) -> None:
    """More workloads, with events and stops, in every project the measured users see."""
    from apps.workloads import services

    for n in range(count):
        for username, project in (("alice", "vision"), ("bob", "nlp"), ("carol", "forecasting")):
            workload = submit_as(demo[username], project=project, name=f"grow-{n}")
            if n % 3 == 0:
                services.workload_stop(actor=demo["admin"], workload=workload)


@pytest.mark.parametrize("username", ["admin", "deptadmin", "alice", "viewer"])
@pytest.mark.parametrize("query", ["", "?project=vision", "?status=submitting,stopping&kind=training&owner=alice"])
def test_list_query_count_is_pinned_and_constant(client_for, demo, workloads, make_outside,
                                                 django_assert_num_queries, username, query):
    client = client_for(username)
    # Work from outside the portal mixed in, attributed to alice or to no one; it waits in Kueue (a gang of two
    # pods), so a page that lists it explains it: explain_workloads' three queries and the pools' nodes, once.
    make_outside(owner=demo["alice"])
    expected = 7 if "kind=training" in query else 7 + 4
    # session, user, grants, count, rows with their relations, their data sources, their credentials
    with django_assert_num_queries(expected):
        first = call(client, "GET", "workloads/" + query)
    assert first.status_code == 200
    grow(demo)
    for number in range(3):
        for project in ("vision", "nlp", "forecasting"):
            make_outside(project=project, owner=demo["alice"] if number == 0 else None)
    with django_assert_num_queries(expected):
        second = call(client, "GET", "workloads/" + query)
    assert second.json()["count"] > first.json()["count"]


def test_detail_and_token_list_query_counts(client, client_for, demo, workloads, django_assert_num_queries):
    grow(demo)
    lead = client_for("lead")
    # session, user, grants, row with its relations, data sources, credentials, events with actors, the
    # Kubernetes events of its objects
    with django_assert_num_queries(8):
        assert call(lead, "GET", f"workloads/{workloads['wl_alice']}/").status_code == 200
    token = personal_token(demo["deptadmin"])
    with django_assert_num_queries(6):  # token with its user, grants, count, rows, data sources, credentials
        assert call(client, "GET", "workloads/", HTTP_AUTHORIZATION=f"Token {token}").status_code == 200


# --- schema ---------------------------------------------------------------------------------------------------------


def test_schema_lists_the_workload_endpoints(client_for):
    from drf_spectacular.validation import validate_schema

    schema = client_for("alice").get("/api/v1/schema/", {"format": "json"}).json()
    validate_schema(schema)
    paths = schema["paths"]
    assert {"get", "post"} <= set(paths["/api/v1/workloads/"])
    assert set(paths["/api/v1/workloads/{id}/"]) >= {"get"} and "delete" not in paths["/api/v1/workloads/{id}/"]
    assert "202" in paths["/api/v1/workloads/{id}/stop/"]["post"]["responses"]
    assert "201" in paths["/api/v1/workloads/"]["post"]["responses"]
    request = schema["components"]["schemas"]["WorkloadSubmitRequest"]
    assert {"project", "kind", "name", "image", "node_pool", "gpus", "labels"} <= set(request["required"])


def test_browsable_api_renders(client_for, workloads):
    for path in ("workloads/", f"workloads/{workloads['wl_alice']}/"):
        response = client_for("alice").get("/api/v1/" + path, HTTP_ACCEPT="text/html")
        assert response.status_code == 200
        assert response["Content-Type"].startswith("text/html")


def test_every_field_error_comes_in_one_400(client_for, demo, django_capture_on_commit_callbacks):
    """Shape errors of the serializer (gpus, memory), the service's refusals of the fields that passed (name,
    labels) and its quota refusals (non-preemptible beyond deserved) in one answer, in the API's error shape."""
    changes = {"name": "My_Run", "memory": "lots", "pods": 3, "preemptible": False, "cpu": -1,
               "labels": {"model": "res net!", "data_class": "public"}}
    with django_capture_on_commit_callbacks() as callbacks:
        response = call(client_for("alice"), "POST", "workloads/", body(**changes))
    assert response.status_code == 400
    errors = response.json()
    assert "Kubernetes quantity" in errors["memory"][0]
    assert "greater than or equal to 0" in errors["cpu"][0]
    assert "Kubernetes DNS-1123 label" in errors["name"][0]
    assert "is not a valid Kubernetes label value" in errors["labels"]["model"][0]
    assert "Non-preemptible work must fit in Vision's deserved quota" in errors["preemptible"][0]
    assert set(errors) == {"memory", "cpu", "name", "labels", "preemptible"}
    assert workload_rows() == (0, 0) and callbacks == []


def test_an_unknown_field_still_reports_the_other_refusals(client_for, demo):
    response = call(client_for("alice"), "POST", "workloads/", body(preemtible=False, gpus=9))
    assert response.status_code == 400
    errors = response.json()
    assert errors["preemtible"] == ["Unknown field."]
    assert "at most 8" in errors["gpus"][0]


def test_submit_resubmit_own_stop_and_bulk_stop_through_the_api_each_write_an_audit_row(client_for):
    """The API's writes on workloads are audited as the pages' are: one row per submit, resubmit and stop (a bulk
    stop's marked as such), with the actor and the workload."""
    from apps.core.models import AuditEvent

    client = client_for("alice")
    first = call(client, "POST", "workloads/", body(name="first")).json()["id"]
    again = call(client, "POST", f"workloads/{first}/resubmit/", {"gpus": 1}).json()["id"]
    assert call(client, "POST", f"workloads/{first}/stop/").status_code == 202
    second = call(client, "POST", "workloads/", body(name="second")).json()["id"]
    assert call(client, "POST", "workloads/stop/", {"ids": [again, second]}).status_code == 202
    rows = [(e.action, int(e.object_id), e.actor.username, (e.after or {}).get("bulk"))
            for e in AuditEvent.objects.filter(object_type="workload").select_related("actor").order_by("id")]
    assert rows == [("workload.submit", first, "alice", None), ("workload.resubmit", again, "alice", None),
                    ("workload.stop", first, "alice", False), ("workload.submit", second, "alice", None),
                    ("workload.stop", again, "alice", True), ("workload.stop", second, "alice", True)]
