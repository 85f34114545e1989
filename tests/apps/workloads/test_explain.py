"""The cause of every kind of wait, with its numbers: the pure sentence builder, and the facts gathered for a viewer
from the demo organisation's quotas and a hand-written mirror (the kubesim tests in tests/worker/test_explain_cluster.py
get the mirror from the real watcher)."""

from dataclasses import replace
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from django.utils import timezone

from apps.accounts import access
from apps.cluster.models import ClusterQueueState, LocalQueueState, NodeState
from apps.org.models import Department, NodePool, PriorityClass, Project, Quota
from apps.workloads.capacity import Assessment, DepartmentQuota, PoolTree, ProjectQuota
from apps.workloads.explain import (
    ADMITTING,
    BEHIND,
    DEPARTMENT_LIMIT,
    GANG,
    INACTIVE,
    MISCONFIGURED,
    NEVER_FITS,
    NO_QUOTA,
    NOT_LENDABLE,
    POOL_FULL,
    PREEMPTED,
    PREEMPTING,
    PROJECT_DESERVED,
    PROJECT_LIMIT,
    QUEUE_STOPPED,
    QUOTA,
    REASONS,
    STOPPED_QUEUE,
    Share,
    WaitFacts,
    explain,
    explain_probe,
    explain_workloads,
    forecast,
    kueue_more_needed,
)
from apps.workloads.models import Kind, Status, Workload, WorkloadEvent
from tests.factories import WorkloadFactory

H100 = NodePool(slug="h100", name="H100", capacity=16)


def queued(**overrides):
    project = Project(pk=1, slug="vision", name="Vision", namespace="proj-vision",
                      department=Department(name="Research"))
    values = {"pk": 1, "project": project, "kind": Kind.TRAINING, "node_pool": H100,
              "gpus": 4, "pods": 1, "preemptible": False, "status": Status.QUEUED, "status_reason": "Pending",
              "status_message": "couldn't assign flavors to pod set main: insufficient unused quota for "
                                "nvidia.com/gpu in flavor h100, 2 more needed", "queue_position_local": 3,
              "kueue_name": "job-wl-1-abcde"}
    values.update(overrides)
    return Workload(**values)


def fits(available, units=4, potential=16, short_at=None):
    return Assessment(units=units, available=Decimal(available), potential=Decimal(potential), short_at=short_at,
                      room={})


def test_guaranteed_queue_waiting_for_quota():
    result = explain(queued(), WaitFacts(deserved=4, limit=8, queue_used=Decimal(2),
                                         assessment=fits(2, short_at="queue")))
    assert result.reason == PROJECT_DESERVED and result.kind == QUOTA
    assert result.sentence == ("Waiting for 4 x H100: non-preemptible work runs only inside Vision's deserved quota, "
                               "and your project's guaranteed queue has 2 of 4 in use, so 2 more are needed. Mark it "
                               "preemptible to use idle capacity beyond it. 3 workloads are ahead of you.")
    assert result.headline == "2 more H100 needed: non-preemptible work holds 2 of Vision's deserved 4"
    assert result.numbers["requested"] == 4 and result.numbers["position"] == 3
    assert result.numbers["more_needed"] == 2 == kueue_more_needed(queued().status_message)


def test_elastic_work_at_its_limit_while_the_pool_idles():
    """The limit case: 8 of 8 in use, 8 of 16 idle; the limit is the cause."""
    result = explain(queued(preemptible=True, queue_position_local=0),
                     WaitFacts(deserved=4, limit=8, project_used=Decimal(8), department_deserved=8,
                               department_limit=12, department_used=Decimal(8), pool_capacity=16,
                               pool_used=Decimal(8), assessment=fits(0, short_at="project")))
    assert result.reason == PROJECT_LIMIT and result.kind == QUOTA
    assert result.sentence == ("Waiting for 4 x H100: Vision is at its limit there, 8 of 8 in use, so 4 more are "
                               "needed; 8 of the pool's 16 are idle, but the limit caps Vision. It starts when "
                               "Vision's own work frees them, or when an admin raises the limit. You are next in "
                               "line.")
    assert "no other team has idle GPUs" not in result.sentence
    assert result.headline == "4 more H100 needed: Vision is at its limit (8 of 8)"
    assert (result.numbers["pool_idle"], result.numbers["project_used"], result.numbers["limit"]) == (8, 8, 8)


def test_below_its_limit_a_request_that_would_cross_it_says_so_not_at_its_limit():
    """6 of 8 in use and 4 asked: the project is not at its limit, the request would take it over."""
    result = explain(queued(preemptible=True, queue_position_local=0, status_message="... 2 more needed"),
                     WaitFacts(deserved=4, limit=8, project_used=Decimal(6), department_deserved=8,
                               department_limit=12, department_used=Decimal(6), pool_capacity=16,
                               pool_used=Decimal(6), assessment=fits(2, short_at="project")))
    assert result.reason == PROJECT_LIMIT
    assert "at its limit" not in result.sentence and "at its limit" not in result.headline
    assert result.sentence.startswith("Waiting for 4 x H100: Vision has 6 of its limit of 8 in use there; these 4 "
                                      "would take it over the limit, so 2 more are needed;")
    assert result.headline == "2 more H100 needed: Vision would go over its limit (6 of 8 in use, asks 4)"


def test_below_its_limit_a_department_the_request_would_take_over_says_so():
    result = explain(queued(preemptible=True, status_message="... 2 more needed"),
                     WaitFacts(deserved=4, limit=8, project_used=Decimal(2), department="Research",
                               department_limit=12, department_used=Decimal(10), pool_capacity=16,
                               pool_used=Decimal(10), assessment=fits(2, short_at="department"),
                               department_holders=(Share("Vision", Decimal(2)), Share(None, Decimal(8)))))
    assert result.reason == DEPARTMENT_LIMIT
    assert "Research has 10 of its limit of 12 in use there (Vision 2, others 8); these 4 would take it over the " \
           "limit, so 2 more are needed; Vision itself uses 2 of its limit 8." in result.sentence
    assert result.headline == "2 more H100 needed: Research would go over its limit (10 of 12 in use, asks 4)"


def test_department_at_its_limit_names_only_visible_projects():
    result = explain(queued(preemptible=True),
                     WaitFacts(deserved=4, limit=8, project_used=Decimal(4), department="Research",
                               department_limit=12, department_used=Decimal(12), pool_capacity=16,
                               pool_used=Decimal(12), assessment=fits(0, short_at="department"),
                               department_holders=(Share("Vision", Decimal(4)), Share(None, Decimal(8)))))
    assert result.reason == DEPARTMENT_LIMIT
    assert "Research is at its limit there, 12 of 12 in use (Vision 4, others 8), so 4 more are needed; Vision " \
           "itself uses 4 of its limit 8." in result.sentence
    assert result.numbers["holders"] == [{"project": "Vision", "units": 4}, {"project": None, "units": 8}]


def test_pool_physically_full_says_who_holds_it():
    result = explain(queued(preemptible=True, queue_position_local=None),
                     WaitFacts(deserved=4, limit=8, project_used=Decimal(4), department_limit=12,
                               department_used=Decimal(8), pool_capacity=16, pool_used=Decimal(16),
                               assessment=fits(0, short_at="pool"),
                               holders=(Share("Vision", Decimal(4)), Share("NLP", Decimal(4)), Share(None, Decimal(5)),
                                        Share(None, Decimal(3)))))
    assert result.reason == POOL_FULL
    assert result.sentence.startswith("Waiting for 4 x H100: 16 of the pool's 16 are in use (NLP 4, Vision 4, others "
                                      "8), so 4 more are needed.")
    assert result.headline == "4 more H100 needed: the pool is full (16 of 16 in use)"


def test_each_tuple_of_holders_is_worded_as_it_reads_whichever_was_worded_before():
    """The words are remembered by the tuple's identity: other holders, or equal ones built anew, read as they are."""
    def holders_in_words(holders: tuple[Share, ...]) -> tuple[str, list]:
        result = explain(queued(preemptible=True, queue_position_local=None),
                         WaitFacts(deserved=4, limit=8, project_used=Decimal(4), pool_capacity=16,
                                   pool_used=Decimal(16), assessment=fits(0, short_at="pool"), holders=holders))
        return result.sentence.split(" (")[1].split(")")[0], result.numbers["holders"]

    first = (Share("Vision", Decimal(4)), Share(None, Decimal(12)))
    other = (Share("NLP", Decimal(10)), Share("Vision", Decimal(6)))
    assert holders_in_words(first) == ("Vision 4, others 12", [{"project": "Vision", "units": 4},
                                                               {"project": None, "units": 12}])
    assert holders_in_words(other) == ("NLP 10, Vision 6", [{"project": "NLP", "units": 10},
                                                            {"project": "Vision", "units": 6}])
    again = (Share("Vision", Decimal(4)), Share(None, Decimal(12)))
    assert again is not first and holders_in_words(again) == holders_in_words(first)
    assert holders_in_words(first)[1] is not holders_in_words(first)[1]  # the API's list is the caller's own


@pytest.mark.parametrize(("keepers", "wording"), [
    ((Share("Serving", Decimal(4)),), "Serving (4) keeps 4 of them for non-preemptible work and does not lend them"),
    ((Share(None, Decimal(4)),), "a project you cannot see (4) keeps 4 of them"),
])
def test_idle_cards_a_non_lending_project_keeps(keepers, wording):
    """The lending case: 4 H100 idle because Serving does not lend, now said on the page."""
    result = explain(queued(preemptible=True, queue_position_local=None),
                     WaitFacts(deserved=4, limit=8, project_used=Decimal(4), department_limit=12,
                               department_used=Decimal(8), pool_capacity=16, pool_used=Decimal(12),
                               assessment=fits(0, short_at="pool"), held_back={"pool": keepers}))
    assert result.reason == NOT_LENDABLE and wording in result.sentence
    assert "4 of the pool's 16 are idle" in result.sentence and "4 more are needed" in result.sentence
    assert result.numbers["held_back"] == 4 and result.numbers["held_back_at"] == "pool"


def test_behind_earlier_work_when_there_is_room():
    result = explain(queued(preemptible=True, queue_position_local=2),
                     WaitFacts(deserved=4, limit=8, project_used=Decimal(0), pool_capacity=16, pool_used=Decimal(0),
                               assessment=fits(8)))
    assert result.reason == BEHIND and result.numbers["ahead"] == 2
    assert result.sentence == ("Waiting for 4 x H100: there is room for it (8 free to Vision), but 2 earlier or "
                               "higher-priority workloads ahead of you in elastic-h100 go first.")
    first = explain(queued(preemptible=True, queue_position_local=0),
                    WaitFacts(deserved=4, limit=8, project_used=Decimal(0), pool_capacity=16, pool_used=Decimal(0),
                              assessment=fits(8)))
    assert first.reason == ADMITTING and first.sentence.endswith("You are next in line.")


def test_a_gang_names_its_pods_and_waits_for_them_once_admitted():
    facts = WaitFacts(deserved=4, limit=8, project_used=Decimal(8), pool_capacity=16, pool_used=Decimal(8),
                      assessment=fits(0, units=8, short_at="project"))
    waiting = explain(queued(preemptible=True, gpus=2, pods=4), replace(facts, node_allocatable=(8, 8, 1)))
    assert waiting.sentence.startswith("Waiting for 8 x H100 (4 pods of 2 each, admitted together; 2 of the pool's "
                                       "3 nodes can host such a pod): Vision is at its limit")
    assert waiting.numbers["pods"] == 4 and waiting.numbers["gpus_per_pod"] == 2
    assert (waiting.numbers["pool_nodes"], waiting.numbers["nodes_hosting_a_pod"]) == (3, 2)
    too_small = explain(queued(preemptible=True, gpus=2, pods=4), replace(facts, node_allocatable=(1, 1)))
    assert "none of the pool's 2 nodes can host such a pod" in too_small.sentence
    unknown = explain(queued(preemptible=True, gpus=2, pods=4), facts)  # no nodes mirrored: no node figures
    assert unknown.sentence.startswith("Waiting for 8 x H100 (4 pods of 2 each, admitted together): Vision")
    assert unknown.numbers["pool_nodes"] is None and unknown.numbers["nodes_hosting_a_pod"] is None
    admitted = explain(queued(status=Status.ADMITTED, gpus=2, pods=4), facts)
    assert admitted.reason == GANG and admitted.headline == "Admitted: waiting for all 4 pods to be ready"
    timed_out = explain(queued(preemptible=True, gpus=2, pods=4, kueue_conditions=[
        {"type": "Requeued", "status": "False", "reason": "PodsReadyTimeout"}]), facts)
    assert timed_out.reason == GANG and "not all 4 pods were ready within Kueue's timeout" in timed_out.sentence


def test_waiting_for_preempted_workloads_names_only_visible_victims():
    from apps.workloads.explain import Peer

    result = explain(queued(status_reason="WaitingForPreemptedWorkloads", queue_position_local=None),
                     WaitFacts(victims=(Peer(7, "sweep", "Vision"), Peer())))
    assert result.reason == PREEMPTING and "waits for the workloads it preempted (2)" in result.sentence
    assert result.sentence.endswith("sweep (Vision) and 1 in a project you cannot see.")
    assert result.numbers["victims"] == [{"id": 7, "name": "sweep", "project": "Vision"}]
    assert result.numbers["hidden_victims"] == 1


def test_waiting_for_preemptions_another_workload_started():
    """Kueue 0.20: its targets overlapped another workload's in the same cycle; it preempts nothing itself and fits
    once those preemptions complete."""
    result = explain(queued(status_reason="WaitingForPreemptedWorkloads", queue_position_local=None,
                            status_message="Workload has overlapping preemption targets with another workload, but "
                                           "will fit after these preemptions complete"), WaitFacts())
    assert result.reason == PREEMPTING
    assert result.sentence == ("Starting soon: Kueue is already preempting work for another workload, and 4 x H100 "
                               "fits once that work has released its GPUs.")
    assert result.headline == "Making room: waiting for preemptions already under way"


def test_preempted_says_by_whom_as_far_as_the_viewer_may_see():
    from apps.workloads.explain import Peer

    hidden = explain(queued(status=Status.PREEMPTED, status_reason="InCohortReclamation"),
                     WaitFacts(preemptor=Peer(), preemption_reason="InCohortReclamation"))
    assert hidden.reason == PREEMPTED and hidden.kind == PREEMPTING
    assert hidden.sentence.startswith("Preempted by a workload of a project you cannot see, to give back borrowed "
                                      "quota to the project that deserves it; it goes back into the queue")
    at = datetime(2026, 3, 1, 10, 0, tzinfo=UTC)
    seen = explain(queued(status=Status.PREEMPTED, status_reason="InClusterQueue"),
                   WaitFacts(preemptor=Peer(3, "serve", "NLP"), preemption_reason="InClusterQueue", preempted_at=at))
    assert seen.sentence.startswith("Preempted on 2026-03-01 10:00:00 UTC by #3 serve (NLP), to make room for "
                                    "higher-priority work in the same queue; it goes back into the queue")
    assert seen.numbers["preemptor"]["id"] == 3 and seen.numbers["preempted_at"] == at.isoformat()
    assert seen.preemption is not None and seen.sentence.startswith(seen.preemption.sentence[:-1])


def test_never_fits_says_what_to_change():
    result = explain(queued(gpus=12, status_reason="ExceedsMaxQuota", preemptible=True),
                     WaitFacts(limit=8, assessment=fits(0, units=12, potential=8)))
    assert result.reason == NEVER_FITS and result.numbers["change"] == "project_limit"
    assert result.sentence == ("This can never start as submitted: it asks for 12 x H100 but Vision may use at most "
                               "8 there. Ask for fewer GPUs or pods, or ask your admin for more quota.")
    held = explain(queued(preemptible=True, status=Status.REJECTED, status_reason="ExceedsMaxQuota"),
                   WaitFacts(deserved=0, limit=4, department_limit=4, pool_capacity=16,
                             assessment=fits(0, potential=0), keepers=(Share(None, Decimal(4)),)))
    assert held.numbers["change"] == "not_lendable"
    assert "at most 0 of them can ever be free to Vision, since a project you cannot see (4) does not lend" \
        in held.sentence


def test_no_quota_stopped_queue_misconfigured_and_inactive():
    assert explain(queued(), WaitFacts(has_quota=False)).reason == NO_QUOTA
    broken = explain(queued(status_reason="Misconfigured", status_message="ClusterQueue x doesn't exist"),
                     WaitFacts(assessment=fits(4)))
    assert broken.reason == MISCONFIGURED and "ClusterQueue x doesn't exist" in broken.sentence
    held = explain(queued(), WaitFacts(queue_active=False, queue_reason="Stopped", assessment=fits(4)))
    assert held.reason == QUEUE_STOPPED and held.kind == STOPPED_QUEUE and "on hold by an admin" in held.sentence
    gone = explain(queued(status=Status.STOPPED, status_reason="Deactivated",
                          status_message="The workload is deactivated"), WaitFacts())
    assert gone.reason == INACTIVE and "will not start again" in gone.sentence


@pytest.mark.parametrize("status", [Status.RUNNING, Status.ADMITTED, Status.SUCCEEDED, Status.SUBMITTING,
                                    Status.STOPPED])
def test_nothing_to_explain_unless_waiting(status):
    assert explain(queued(status=status), WaitFacts()) is None


def test_every_reason_is_documented():
    assert set(REASONS) >= {PROJECT_LIMIT, PROJECT_DESERVED, DEPARTMENT_LIMIT, POOL_FULL, NOT_LENDABLE, BEHIND,
                            ADMITTING, GANG, PREEMPTING, PREEMPTED, QUEUE_STOPPED, MISCONFIGURED, NO_QUOTA, INACTIVE,
                            NEVER_FITS}


# --- the tree: Kueue's arithmetic on the demo organisation's H100 pool --------------------------------------------


def demo_tree(**used):
    """The demo's H100 tree; used = {"vision": (guaranteed, elastic), ...}."""
    projects = {"vision": (1, 1, 4, 8, True), "nlp": (2, 1, 4, 8, True), "serving": (3, 2, 4, 4, False),
                "etl": (4, 2, 0, 4, True), "forecasting": (5, 3, 2, 6, True), "analytics": (6, 3, 2, 4, True)}
    return PoolTree.build(
        capacity=16, departments=[DepartmentQuota(1, 8, 12), DepartmentQuota(2, 4, 4), DepartmentQuota(3, 4, 8)],
        projects=[ProjectQuota(pk, dept, deserved, limit, lends=lends,
                               guaranteed_used=Decimal(used.get(slug, (0, 0))[0]),
                               elastic_used=Decimal(used.get(slug, (0, 0))[1]))
                  for slug, (pk, dept, deserved, limit, lends) in projects.items()])


def test_tree_limit_lending_and_capacity():
    at_limit = demo_tree(vision=(0, 8)).assess(project_id=1, guaranteed=False, units=4)
    assert (at_limit.available, at_limit.short_at) == (0, "project")
    held = demo_tree(vision=(0, 4), nlp=(4, 0), forecasting=(0, 4)).assess(project_id=1, guaranteed=False, units=4)
    assert (held.available, held.short_at, held.more_needed) == (0, "pool", 4)  # Serving's 4 idle, not lent
    etl = demo_tree().assess(project_id=4, guaranteed=False, units=4)
    assert etl.potential == 0 and not etl.ever_fits  # Production's quota is all Serving's, which does not lend
    serving = demo_tree(nlp=(0, 4), vision=(0, 4), forecasting=(0, 4)).assess(project_id=3, guaranteed=True, units=4)
    assert serving.fits  # what Serving keeps is always there for its non-preemptible work


def test_a_tree_answers_each_question_once_and_alike():
    tree = demo_tree(vision=(0, 4), nlp=(4, 0))
    questions = [(project_id, guaranteed, units) for project_id in (1, 3, 4, 99) for guaranteed in (True, False)
                 for units in (1, 4, 9)]
    first = [tree.assess(project_id=p, guaranteed=g, units=u) for p, g, u in questions]
    assert first == [demo_tree(vision=(0, 4), nlp=(4, 0)).assess(project_id=p, guaranteed=g, units=u)
                     for p, g, u in questions]  # what a tree asked nothing before answers
    again = [tree.assess(project_id=p, guaranteed=g, units=u) for p, g, u in questions]
    assert all(a is b for a, b in zip(first, again, strict=True))
    assert first[questions.index((99, True, 1))] is None  # no quota, no queue


# --- gathering facts for a viewer ---------------------------------------------------------------------------------


def mirror_usage(**used):
    """Mirror rows for the demo H100 queues: used = {"vision": (guaranteed, elastic), ...}."""
    pool, now = NodePool.objects.get(slug="h100"), timezone.now()
    for project in Project.objects.filter(quotas__node_pool=pool):
        guaranteed, elastic = used.get(project.slug, (0, 0))
        for kind, units in (("guaranteed", guaranteed), ("elastic", elastic)):
            ClusterQueueState.objects.update_or_create(name=f"proj-{project.slug}-h100-{kind}", defaults={
                "project": project, "node_pool": pool, "guaranteed": kind == "guaranteed", "used": Decimal(units),
                "nominal": Decimal(Quota.objects.get(project=project, node_pool=pool).deserved
                                   if kind == "guaranteed" else 0), "observed_at": now})


def waiting_in(demo, project="vision", owner="alice", **values):
    defaults = {"gpus": 4, "preemptible": True, "status": Status.QUEUED, "status_reason": "Pending",
                "queue_position_local": 0, "kueue_name": "k"}
    defaults.update(values)
    return WorkloadFactory(project=Project.objects.get(slug=project), owner=demo[owner],
                           node_pool=NodePool.objects.get(slug="h100"),
                           priority_class=PriorityClass.objects.get(name="train" if defaults["preemptible"]
                                                                    else "build"), **defaults)


def explained(workload, viewer):
    row = Workload.objects.select_related("project", "node_pool").get(pk=workload.pk)
    return explain_workloads([row], viewer=viewer)[row.pk]


def test_explain_workloads_reads_the_mirror_in_fixed_queries(demo, django_assert_num_queries):
    mirror_usage(vision=(4, 0))
    rows = [waiting_in(demo, gpus=2, preemptible=False, queue_position_local=index, kueue_name=f"k{index}")
            for index in range(5)]
    workloads = list(Workload.objects.select_related("project__department", "node_pool").order_by("pk"))
    access.grants_for(demo["alice"])  # a request has them already (the view asked the access module)
    with django_assert_num_queries(3):
        explanations = explain_workloads(workloads, viewer=demo["alice"])
    assert explanations[rows[0].pk].sentence == (
        "Waiting for 2 x H100 80GB: non-preemptible work runs only inside Vision's deserved quota, and your project's "
        "guaranteed queue has 4 of 4 in use, so 2 more are needed. Mark it preemptible to use idle capacity beyond "
        "it. You are next in line.")
    assert explanations[rows[2].pk].sentence.endswith("2 workloads are ahead of you.")
    for _ in range(10):
        waiting_in(demo, project="forecasting", owner="carol")
    workloads = list(Workload.objects.select_related("project__department", "node_pool").order_by("pk"))
    with django_assert_num_queries(3):
        explain_workloads(workloads, viewer=demo["alice"])


def test_waiting_gangs_read_their_pools_nodes_in_one_more_query(demo, django_assert_num_queries):
    """The node figures come from the watcher's node mirror: ready, schedulable nodes only, one query for all."""
    mirror_usage(vision=(0, 8))
    pool, now = NodePool.objects.get(slug="h100"), timezone.now()
    for name, units, ready, cordoned in (("n-0", 8, True, False), ("n-1", 8, True, False), ("n-2", 1, True, False),
                                         ("n-cordoned", 8, True, True), ("n-not-ready", 8, False, False)):
        NodeState.objects.create(name=name, node_pool=pool, allocatable_gpus=units, ready=ready,
                                 unschedulable=cordoned, observed_at=now)
    rows = [waiting_in(demo, gpus=2, pods=4, queue_position_local=index, kueue_name=f"k{index}") for index in range(4)]
    workloads = list(Workload.objects.select_related("project__department", "node_pool").order_by("pk"))
    access.grants_for(demo["alice"])
    with django_assert_num_queries(4):  # quotas, queues, stopped local queues, the pools' nodes
        explanations = explain_workloads(workloads, viewer=demo["alice"])
    first = explanations[rows[0].pk]
    assert first.sentence.startswith("Waiting for 8 x H100 80GB (4 pods of 2 each, admitted together; 2 of the "
                                     "pool's 3 nodes can host such a pod): ")
    assert (first.numbers["pool_nodes"], first.numbers["nodes_hosting_a_pod"]) == (3, 2)


def test_idle_cards_held_back_by_serving_are_named_only_for_those_who_may_see_serving(demo):
    mirror_usage(vision=(0, 4), nlp=(4, 0), forecasting=(0, 4))
    workload = waiting_in(demo)
    for username in ("alice", "lead", "deptadmin"):
        seen = explained(workload, demo[username])
        assert seen.reason == NOT_LENDABLE
        assert "a project you cannot see (4) keeps 4 of them" in seen.sentence and "Serving" not in seen.sentence
        assert seen.numbers["held_back_by"] == [{"project": None, "units": 4}]
    admin = explained(workload, demo["admin"])
    assert "Serving (4) keeps 4 of them" in admin.sentence
    assert admin.headline == "4 more H100 80GB needed: 4 idle held back by Serving (4)"


def test_a_full_pool_is_broken_down_by_what_the_viewer_may_see(demo):
    mirror_usage(vision=(0, 4), nlp=(0, 4), serving=(4, 0), forecasting=(0, 4))
    workload = waiting_in(demo)
    alice = explained(workload, demo["alice"])
    assert alice.reason == POOL_FULL and "(Vision 4, others 12)" in alice.sentence
    for name in ("NLP", "Serving", "Forecasting", "nlp", "serving", "forecasting"):
        assert name not in alice.sentence and name not in str(alice.numbers)
    assert "(NLP 4, Vision 4, others 8)" in explained(workload, demo["lead"]).sentence
    assert "(Forecasting 4, NLP 4, Serving 4, Vision 4)" in explained(workload, demo["admin"]).sentence


def test_department_limit_with_the_rest_of_the_pool_idle(demo):
    mirror_usage(vision=(0, 4), nlp=(4, 4))
    result = explained(waiting_in(demo), demo["alice"])
    assert result.reason == DEPARTMENT_LIMIT
    assert "Research is at its limit there, 12 of 12 in use (Vision 4, others 8)" in result.sentence
    assert (result.numbers["department_used"], result.numbers["department_limit"]) == (12, 12)


def test_never_fits_when_the_department_quota_is_a_non_lending_project_s(demo):
    result = explained(waiting_in(demo, project="etl", owner="admin"), demo["admin"])
    assert result.reason == NEVER_FITS and result.numbers["change"] == "not_lendable"
    assert "at most 0 of them can ever be free to ETL, since Serving (4) does not lend" in result.sentence


def test_non_preemptible_work_reclaims_its_lent_deserved_quota(demo):
    mirror_usage(nlp=(0, 8), serving=(4, 0), forecasting=(0, 4))
    result = explained(waiting_in(demo, preemptible=False), demo["alice"])
    assert result.reason == PREEMPTING and "Vision's deserved quota is lent to others" in result.sentence


def test_no_quota_and_a_stopped_queue(demo):
    mirror_usage()
    workload = waiting_in(demo)
    LocalQueueState.objects.create(namespace="proj-vision", name="elastic-h100", project=workload.project,
                                   active=False, active_reason="Stopped", observed_at=timezone.now())
    assert explained(workload, demo["alice"]).reason == QUEUE_STOPPED
    Quota.objects.filter(project=workload.project, node_pool__slug="h100").delete()
    assert explained(workload, demo["alice"]).reason == NO_QUOTA


def test_preemptions_name_preemptors_and_victims_as_far_as_the_viewer_may_see(demo, django_assert_num_queries):
    mirror_usage(nlp=(4, 0), vision=(0, 4))
    reclaimer = waiting_in(demo, project="nlp", owner="bob", name="reclaim", preemptible=False, k8s_uid="uid-r",
                           status_reason="WaitingForPreemptedWorkloads")
    victim = waiting_in(demo, name="victim", status=Status.PREEMPTED, status_reason="InCohortReclamation")
    WorkloadEvent.objects.create(workload=victim, at=timezone.now(), from_status="running", to_status="preempted",
                                 reason="InCohortReclamation", details={"preemptor_job_uid": "uid-r"})
    rows = list(Workload.objects.select_related("project", "node_pool").filter(pk__in=[reclaimer.pk, victim.pk]))
    access.grants_for(demo["alice"])
    with django_assert_num_queries(5):  # quotas, queues, stopped local queues, preemption events, preemptors
        for_alice = explain_workloads(rows, viewer=demo["alice"])
    assert for_alice[victim.pk].sentence.startswith("Preempted on ") and \
        "UTC by a workload of a project you cannot see, to give back borrowed quota" in for_alice[victim.pk].sentence
    for_bob = explain_workloads(rows, viewer=demo["bob"])
    assert "to release their GPUs: 1 in a project you cannot see." in for_bob[reclaimer.pk].sentence
    for_lead = explain_workloads(rows, viewer=demo["lead"])
    assert f"UTC by #{reclaimer.pk} reclaim (NLP), to give back" in for_lead[victim.pk].sentence
    assert for_lead[reclaimer.pk].numbers["victims"] == [{"id": victim.pk, "name": "victim", "project": "Vision"}]


@pytest.mark.parametrize(("cluster_queue_reason", "expected"), [("Stopped", QUEUE_STOPPED),
                                                                ("FlavorNotFound", MISCONFIGURED)])
def test_a_stopped_cluster_queue_is_told_from_a_broken_one(demo, cluster_queue_reason, expected):
    mirror_usage()
    workload = waiting_in(demo, status_reason="Suspended")
    ClusterQueueState.objects.filter(name="proj-vision-h100-elastic").update(
        active=False, active_reason=cluster_queue_reason, active_message="ClusterQueue is inactive")
    LocalQueueState.objects.create(namespace="proj-vision", name="elastic-h100", project=workload.project,
                                   active=False, active_reason="ClusterQueueIsInactive", observed_at=timezone.now())
    assert explained(workload, demo["alice"]).reason == expected


# --- the submit form's forecast: the model run on a workload not submitted yet -------------------------------------


def probe(*, gpus, preemptible=True, pods=1, project="vision"):
    return Workload(kind=Kind.TRAINING, project=Project.objects.get(slug=project),
                    node_pool=NodePool.objects.get(slug="h100"), gpus=gpus, pods=pods, preemptible=preemptible,
                    priority_class=PriorityClass.objects.get(name="train" if preemptible else "build"))


def forecast_of(draft, viewer):
    explanation = explain_probe(draft, viewer=viewer)
    assert explanation is not None
    return forecast(draft, explanation)


def test_forecast_says_it_would_start_now_with_the_free_deserved_units(demo):
    mirror_usage(vision=(0, 0))
    result = forecast_of(probe(gpus=2, preemptible=False), demo["alice"])
    assert result.starts_now and result.explanation.reason == ADMITTING
    assert result.sentence == "Would start now (4 of 4 deserved H100 80GB free)."
    mirror_usage(vision=(0, 4))
    borrowing = forecast_of(probe(gpus=2), demo["alice"])
    assert borrowing.starts_now
    assert borrowing.sentence == "Would start now (4 H100 80GB free to Vision, beyond its deserved 4: preemptible)."


def test_forecast_below_the_limit_says_the_request_would_cross_it(demo):
    mirror_usage(vision=(0, 6))
    result = forecast_of(probe(gpus=4), demo["alice"])
    assert not result.starts_now and result.explanation.reason == PROJECT_LIMIT
    assert result.sentence == ("Would wait: Vision would go over its limit (6 of 8 H100 80GB in use, asks 4); "
                               "2 more H100 80GB needed.")


def test_forecast_says_it_would_wait_at_the_project_limit_with_the_numbers_of_the_waiting_sentence(demo):
    mirror_usage(vision=(0, 8))
    draft = probe(gpus=4)
    result = forecast_of(draft, demo["alice"])
    assert not result.starts_now and result.explanation.reason == PROJECT_LIMIT
    assert result.sentence == "Would wait: Vision is at its limit (8 of 8 H100 80GB); 4 more H100 80GB needed."
    # The same model as for a workload already waiting: its sentence carries the same numbers.
    assert "8 of 8 in use, so 4 more are needed" in explained(waiting_in(demo), demo["alice"]).sentence


def test_forecast_for_non_preemptible_work_inside_a_held_deserved_quota(demo):
    mirror_usage(vision=(4, 0))
    result = forecast_of(probe(gpus=2, preemptible=False), demo["alice"])
    assert result.explanation.reason == PROJECT_DESERVED
    assert result.sentence == ("Would wait: non-preemptible work holds 4 of Vision's deserved 4 H100 80GB; 2 more "
                               "H100 80GB needed.")


def test_forecast_counts_the_queued_work_ahead_and_words_held_back_cards_for_the_viewer(demo):
    mirror_usage()
    waiting_in(demo, gpus=1)
    behind = forecast_of(probe(gpus=1), demo["alice"])
    assert behind.explanation.reason == BEHIND
    assert behind.sentence == ("Would wait: there is room, but 1 earlier or higher-priority workload in elastic-h100 "
                               "goes first.")
    Workload.objects.all().delete()
    mirror_usage(vision=(0, 4), nlp=(4, 0), forecasting=(0, 4))
    held = forecast_of(probe(gpus=4), demo["alice"])
    assert held.explanation.reason == NOT_LENDABLE and "Serving" not in held.sentence
    assert held.sentence.startswith("Would wait: 4 idle held back by a project you cannot see")


def test_forecast_of_what_could_never_start(demo):
    result = forecast_of(probe(gpus=8, pods=2), demo["alice"])
    assert not result.starts_now and result.explanation.reason == NEVER_FITS
    assert result.sentence == "Would never start: Vision may use at most 8 there."


def test_reserved_quota_waiting_for_capacity_names_its_checks():
    from apps.workloads.explain import ADMISSION_CHECKS, PENDING

    checks = [{"name": "capacity", "state": "Pending",
               "message": "Waiting for ProvisioningRequest job-train-1a2b3-capacity-1 to be provisioned"},
              {"name": "budget", "state": "Ready", "message": ""}]
    result = explain(queued(status_reason="UnsatisfiedAdmissionChecks", queue_position_local=None,
                            admission={"pod_sets": [], "checks": checks}), WaitFacts())
    assert result.reason == ADMISSION_CHECKS and result.kind == PENDING
    assert result.headline == "Quota reserved: waiting for capacity being brought up for it"
    assert result.sentence == ("Quota is reserved for 4 x H100; Kueue admits it once its admission checks pass: "
                               "capacity is Pending (Waiting for ProvisioningRequest job-train-1a2b3-capacity-1 to be "
                               "provisioned).")
    assert result.numbers["admission_checks"] == checks[:1]
    retry = explain(queued(status_reason="UnsatisfiedAdmissionChecks", admission={"checks": [
        {"name": "budget", "state": "Retry", "message": ""}]}), WaitFacts())
    assert retry.headline == "Quota reserved: waiting for its admission checks"
    assert retry.sentence.endswith("admission checks pass: budget is Retry.")
