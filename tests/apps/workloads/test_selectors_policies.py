"""The preview of a proposed policy (`selectors.workloads_breaking`): the live work in its scope it would refuse,
merged over the scopes above and under the projects' own policies, with each rule named; nothing saved."""

from __future__ import annotations

from apps.org import services as org
from apps.org.models import Department, Policy, Project
from apps.workloads import selectors
from apps.workloads.models import Status, Workload


def _live(workload: Workload, status: Status = Status.RUNNING) -> Workload:
    Workload.objects.filter(pk=workload.pk).update(status=status)
    return workload


def test_a_department_policy_names_the_live_work_it_would_refuse_and_why(make_workload):
    research = Department.objects.get(slug="research")
    big = _live(make_workload("alice", gpus=4, image="docker.io/me/trainer:1"))
    queued = _live(make_workload("bob", project="nlp", gpus=1, image="docker.io/me/other:1"), Status.QUEUED)
    fine = _live(make_workload("alice", gpus=1, image="nvcr.io/nvidia/pytorch:24.05"))
    finished = _live(make_workload("alice", gpus=8, image="docker.io/me/old:1"), Status.SUCCEEDED)
    proposed = Policy(department=research, max_gpus_per_workload=2, allowed_images=["nvcr.io/*"])

    preview = selectors.workloads_breaking(policy=proposed)

    by_pk = {row.workload.pk: row.violations for row in preview.rows}
    assert set(by_pk) == {big.pk, queued.pk}
    assert fine.pk not in by_pk and finished.pk not in by_pk
    assert set(by_pk[big.pk]) == {"gpus", "image"} and set(by_pk[queued.pk]) == {"image"}
    assert "Research department's policy allows at most 2 GPUs per workload" in by_pk[big.pk]["gpus"][0]
    assert preview.total == 2 and preview.checked == 3
    assert not Policy.objects.exists()


def test_a_projects_own_policy_still_wins_under_a_proposed_department_policy(users, make_workload):
    research, vision = Department.objects.get(slug="research"), Project.objects.get(slug="vision")
    vision_work = _live(make_workload("alice", gpus=2))
    nlp_work = _live(make_workload("bob", project="nlp", gpus=2))
    org.policy_create(actor=users["admin"], project=vision, max_gpus_per_workload=1)

    preview = selectors.workloads_breaking(policy=Policy(department=research, max_gpus_per_workload=1,
                                                         max_runtime_seconds=60))

    found = {row.workload.pk: row.violations for row in preview.rows}
    # Vision's own limit (1) is what its work breaks, named as Vision's; NLP inherits the proposed department limit.
    assert "Vision project's policy" in found[vision_work.pk]["gpus"][0]
    assert "Research department's policy" in found[nlp_work.pk]["gpus"][0]


def test_an_edited_policy_is_previewed_with_its_new_values_not_its_saved_ones(users, make_workload):
    vision = Project.objects.get(slug="vision")
    saved = org.policy_create(actor=users["admin"], project=vision, max_gpus_per_workload=8)
    work = _live(make_workload("alice", gpus=3))
    assert selectors.workloads_breaking(policy=saved).total == 0
    saved.max_gpus_per_workload = 2
    preview = selectors.workloads_breaking(policy=saved)
    assert [row.workload.pk for row in preview.rows] == [work.pk]
    assert Policy.objects.get(pk=saved.pk).max_gpus_per_workload == 8


def test_work_outside_the_scope_and_from_outside_the_portal_is_left_out(make_workload, make_outside):
    vision = Project.objects.get(slug="vision")
    _live(make_workload("bob", project="nlp", gpus=4))
    make_outside(project="vision", status=Status.RUNNING, gpus=4)
    preview = selectors.workloads_breaking(policy=Policy(project=vision, max_gpus_per_workload=1))
    assert preview.total == 0 and preview.checked == 0
