"""The API against its own OpenAPI schema (schemathesis), with the organisation's demo rows and workloads in every
state a list shows (waiting with their reasons, running, finished):

- operation by operation, for a personal token of each demo role: inputs generated from the schema, valid ones and
  invalid ones (a few per operation, bounded in time);
- in sequences (schemathesis's stateful phase), for an admin and a researcher: the links schemathesis infers from
  the schema (a list's ids into the detail, stop, resubmit, logs; a create's id into its read, change and delete)
  chained into short scenarios, a bounded number of them.

Every answer passes every check schemathesis has but one: no 5xx; a documented status, content type, headers and
body (errors too); invalid input refused; nothing still readable after its delete. The one left out,
positive_data_acceptance, wants every schema-valid input accepted, but such input can still name a row that does
not exist or break a rule between fields (an end before its start), where a 400 is right; the bounds the views
enforce are in the schema (tests/apps/workloads/test_api_schema.py checks they agree).

The calls go in process to the WSGI application (inside the test's transaction: what they create or delete is
rolled back), so the same generated input meets the same code as over the network.
"""

from __future__ import annotations

import time

import pytest
from django.db import transaction
from django.utils import timezone
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.specs.openapi.checks import positive_data_acceptance

from apps.accounts import services
from apps.org import services as org_services
from apps.org.models import NodePool, Project
from apps.workloads import logs as workload_logs
from apps.workloads import services as workload_services
from apps.workloads.logs import PodLog
from apps.workloads.models import WorkloadUtilisation
from tests.apps.cluster.test_queue_pages import mirror as mirror_queues
from tests.apps.cluster.test_queue_pages import node
from tests.apps.workloads.test_views_queue import mirror, queued, running

pytestmark = pytest.mark.slow

ROLES = ["admin", "deptadmin", "lead", "alice", "viewer"]
EXAMPLES_PER_OPERATION = 4
SECONDS_PER_ROLE = 300  # a loaded CI machine; unloaded, one role and mode takes about 20 s
# (role, operations, a call the scenarios must have made through a link): the whole API for an admin (a row's id
# from its create or list into its read, change or delete), the workload operations alone for their owner, where
# the list's ids (into detail, stop, resubmit, logs, keep-alive) meet rows in every state.
SEQUENCES = [("admin", "^/api/v1/", "{id}/ 2"), ("alice", "^/api/v1/workloads/", "GET /api/v1/workloads/{id}/ 200")]
SCENARIOS, STEPS_PER_SCENARIO = 40, 6  # unloaded, about 45 s per role (enough scenarios that some follow a link)
NOT_CHECKED = [positive_data_acceptance]
SIGN_IN = "/api/v1/auth/token/"  # password sign-in: its lockout counts failures (tests/apps/accounts/test_signin.py)


@pytest.fixture
def workloads(demo):
    """Work the lists and details show: waiting for quota, waiting in a gang, running (its logs read), finished, in
    two projects."""
    vision, nlp = Project.objects.get(slug="vision"), Project.objects.get(slug="nlp")
    h100 = NodePool.objects.get(slug="h100")

    def submit(user: str, project: Project, name: str, **extra):
        return workload_services.workload_submit(
            actor=demo[user], project=project, kind=extra.pop("kind", "training"), name=name,
            image="pytorch/pytorch:2.4.0", node_pool=h100, gpus=extra.pop("gpus", 1), model_label="resnet",
            data_class="public", **extra)

    mirror(elastic=8)
    queued(submit("alice", vision, "waits-for-quota", gpus=4), 0)
    queued(submit("alice", vision, "waits-as-a-gang", gpus=2, pods=2), 1)
    runs = running(submit("alice", vision, "runs"))
    workload_logs.workload_log_tails_store(workload_id=runs.pk, tails={f"wl-{runs.pk}-0": PodLog(text="epoch 1\n")},
                                           at=timezone.now())  # read by the worker: its logs answer at once
    done = submit("alice", vision, "done", kind="notebook")
    workload_services.workload_stop(actor=demo["alice"], workload=done)
    workload_services.workload_mark_stopped(workload=done, message="Job deleted")
    queued(submit("bob", nlp, "bobs-waits"), 0)
    submit("bob", nlp, "bobs-submitting")
    # Rows for the pages' other lists, so their answers are checked with rows in them and their links lead somewhere:
    # another project's queues, cohorts and a node; a data source, a pull secret, a credential; held but idle.
    mirror_queues("forecasting")
    node("h100-a")
    org_services.data_source_create(actor=demo["admin"], project=vision, name="imagenet", kind="pvc",
                                    claim_name="imagenet", mount_path="/data/imagenet")
    org_services.pull_secret_create(actor=demo["admin"], project=vision, name="nvcr", registry="nvcr.io",
                                    username="robot", password="registry-password")
    workload_services.credential_create(actor=demo["alice"], project=vision, name="wandb", values={"WANDB_KEY": "k"})
    WorkloadUtilisation.objects.create(workload=runs, samples=30, mean_percent=1.0, last_percent=0.0,
                                       idle_since=timezone.now(), idle_flagged_at=timezone.now())


def _follow_briefly(case) -> None:
    if case.query and "follow" in case.query:
        case.query["timeout"] = 1  # a follow streams until its timeout: one second is enough here


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
@pytest.mark.parametrize("username", ROLES)
def test_every_answer_conforms_to_the_schema(demo, workloads, api_schema, username, mode):
    _, secret = services.personal_token_create(user=demo[username], name="schemathesis")
    headers = {"Authorization": f"Token {secret}"}
    deadline = time.monotonic() + SECONDS_PER_ROLE
    called: list[str] = []
    for result in api_schema.get_all_operations():
        operation = result.ok()
        if operation.path == SIGN_IN:
            continue

        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(max_examples=EXAMPLES_PER_OPERATION, deadline=None, database=None, derandomize=True,
                  phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
        def call(case):
            _follow_briefly(case)
            response = case.call(headers=headers)
            case.validate_response(response, headers=headers, excluded_checks=NOT_CHECKED)

        try:
            call()
        except Unsatisfiable:
            if mode is GenerationMode.POSITIVE:
                raise
            continue  # nothing of it can be made invalid (no parameters, no body): the positive run covers it
        called.append(f"{operation.method.upper()} {operation.path}")
        assert time.monotonic() < deadline, f"over {SECONDS_PER_ROLE}s after {len(called)} operations"
    assert len(called) >= (45 if mode is GenerationMode.POSITIVE else 30), called


@pytest.mark.parametrize(("username", "paths", "linked"), SEQUENCES)
def test_sequences_of_calls_conform_to_the_schema(demo, workloads, api_schema, username, paths, linked):
    _, secret = services.personal_token_create(user=demo[username], name="schemathesis")
    headers = {"Authorization": f"Token {secret}"}
    calls: list[str] = []

    class Sequences(api_schema.include(path_regex=paths).exclude(path=SIGN_IN).as_state_machine()):  # type: ignore[misc]
        def setup(self):
            # Each scenario starts from the same rows: Hypothesis replays a failing one to shrink it, and a replay
            # that met the rows an earlier scenario created would not be the same scenario.
            self.savepoint = transaction.savepoint()

        def teardown(self):
            transaction.savepoint_rollback(self.savepoint)

        def before_call(self, case):
            _follow_briefly(case)

        def get_call_kwargs(self, case):
            return {"headers": headers}

        def after_call(self, response, case):
            calls.append(f"{case.operation.method.upper()} {case.operation.path} {response.status_code}")

        def validate_response(self, response, case, additional_checks=None, **kwargs):
            case.validate_response(response, headers=headers, excluded_checks=NOT_CHECKED, transport_kwargs=kwargs)

    started = time.monotonic()
    Sequences.run(settings=settings(max_examples=SCENARIOS, stateful_step_count=STEPS_PER_SCENARIO, deadline=None,
                                    database=None, derandomize=True, suppress_health_check=list(HealthCheck)))
    assert time.monotonic() - started < SECONDS_PER_ROLE
    # The scenarios reached rows through the links, not only through ids made up.
    assert any(linked in call for call in calls), sorted(set(calls))
