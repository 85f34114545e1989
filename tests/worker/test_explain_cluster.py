"""Why it waits, against kubesim with the real worker task and the real watcher, so every number is the mirror's:
the typical waits reproduced with the demo organisation, each with its reason code, its numbers, the same numbers
in the status line and the sentence, and other projects named only for those who may see them."""

import html
import re
from datetime import UTC
from decimal import Decimal

import pytest
from django.urls import reverse

from apps.cluster.models import ClusterQueueState, LocalQueueState, NodeState
from apps.org import services as org_services
from apps.org.models import NodePool, Project, Quota
from apps.usage.selectors import quota_dashboard
from apps.workloads import services
from apps.workloads.explain import kueue_more_needed
from apps.workloads.models import Kind, Status, Workload, WorkloadEvent
from tests.worker.conftest import run_submit_task, signed_in, wait_for
from worker import tasks
from worker.kueue_sync import desired_from_database, reconcile

pytestmark = pytest.mark.slow


def submit(kubesim, user, *, project="vision", pool="h100", gpus=4, pods=1, preemptible=True, seconds=600,
           name="run"):
    workload = services.workload_submit(
        actor=user, project=Project.objects.get(slug=project), kind=Kind.TRAINING, name=name,
        image="pytorch/pytorch:2.4.0", command=["sleep", str(seconds)], node_pool=NodePool.objects.get(slug=pool),
        gpus=gpus, pods=pods, model_label="resnet", data_class="public", preemptible=preemptible)
    run_submit_task(workload)
    kubesim.advance(1)
    return workload


def status_of(workload):
    return Workload.objects.get(pk=workload.pk).status


def mirrored(**used):
    """Wait until the mirror shows these ClusterQueues' usage (name -> units)."""
    def check():
        rows = dict(ClusterQueueState.objects.filter(name__in=list(used)).values_list("name", "used"))
        return all(rows.get(name) == Decimal(units) for name, units in used.items())
    wait_for(check, describe=lambda: list(ClusterQueueState.objects.values_list("name", "used")))


def page(user, workload):
    return signed_in(user).get(reverse("workloads:detail", args=[workload.pk])).content.decode()


def text(fragment):
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", fragment))).strip()


def status_line(content):
    start = content.index('class="status-line"')
    return text(content[start:content.index("</div>", start)].split(">", 1)[1])


def sentence(content):
    start = content.index('class="explanation"')
    return text(content[start:content.index("</p>", start)].split(">", 1)[1])


def waiting(client, workload):
    data = client.get(f"/api/v1/workloads/{workload.pk}/").json()
    return data["waiting"]


def same_numbers(line: str, said: str, more: int) -> None:
    """The status line and the sentence give the same "more needed"."""
    assert f"{more} more H100 80GB needed" in line
    assert f"{more} more are needed" in said


def test_limit_reached_while_cards_stand_idle(kubesim, org, watcher):
    """First case: Vision at its limit (8 of 8 H100) while 8 of 16 stand idle."""
    alice = org["alice"]
    running = [submit(kubesim, alice, name=f"r-{i}") for i in range(2)]
    waits = [submit(kubesim, alice, name=f"w-{i}") for i in range(3)]
    wait_for(lambda: all(status_of(w) == Status.RUNNING for w in running))
    wait_for(lambda: [Workload.objects.get(pk=w.pk).queue_position_local for w in waits] == [0, 1, 2])
    mirrored(**{"proj-vision-h100-elastic": 8})
    content = page(alice, waits[0])
    line, said = status_line(content), sentence(content)
    assert line.startswith("Queued · 4 more H100 80GB needed: Vision is at its limit (8 of 8)")
    assert said.startswith("Waiting for 4 x H100 80GB: Vision is at its limit there, 8 of 8 in use, so 4 more are "
                           "needed; 8 of the pool's 16 are idle, but the limit caps Vision.")
    assert "no other team" not in content
    same_numbers(line, said, 4)
    head = Workload.objects.get(pk=waits[0].pk)
    assert kueue_more_needed(head.status_message) == 4  # Kueue's own number agrees
    data = waiting(signed_in(alice), waits[2])
    assert data["reason"] == "project_limit" and data["numbers"]["ahead"] == 2
    assert data["sentence"].endswith("2 workloads are ahead of you.")
    # The dashboard shows the same figures.
    (h100,) = [d for d in quota_dashboard(user=alice) if d.pool.slug == "h100"]
    vision = next(p for d in h100.departments for p in d.children if p.slug == "vision")
    assert (vision.used, vision.limit) == (data["numbers"]["project_used"], data["numbers"]["limit"]) == (8, 8)


def reclaim(kubesim, org):
    """Data Science fills its 4 H100, Vision borrows 4 beyond its deserved 4, then NLP reclaims its lent deserved
    quota with non-preemptible work: one of Vision's runs is preempted and requeued. Serving's 4 stay idle: it does
    not lend (lendingLimit 0)."""
    other = submit(kubesim, org["carol"], project="forecasting", name="ds")
    wait_for(lambda: status_of(other) == Status.RUNNING)
    borrowed = [submit(kubesim, org["alice"], name=f"b-{i}") for i in range(2)]
    wait_for(lambda: all(status_of(w) == Status.RUNNING for w in borrowed))
    reclaimer = submit(kubesim, org["bob"], project="nlp", preemptible=False, name="reclaim")
    wait_for(lambda: status_of(reclaimer) == Status.RUNNING)
    wait_for(lambda: WorkloadEvent.objects.filter(workload__in=borrowed, to_status=Status.PREEMPTED).exists())
    victim = next(w for w in borrowed if WorkloadEvent.objects.filter(workload=w, to_status=Status.PREEMPTED).exists())
    wait_for(lambda: status_of(victim) == Status.REQUEUED)
    mirrored(**{"proj-forecasting-h100-elastic": 4, "proj-vision-h100-elastic": 4, "proj-nlp-h100-guaranteed": 4})
    wait_for(lambda: kueue_more_needed(Workload.objects.get(pk=victim.pk).status_message) is not None)
    # Queue positions come from the watcher's periodic visibility poll: wait for the victim's.
    wait_for(lambda: Workload.objects.get(pk=victim.pk).queue_position_local is not None)
    return victim


def test_preempted_then_requeued_behind_cards_serving_keeps(kubesim, org, watcher):
    """Second and third cases: 4 H100 idle because Serving does not lend, and a requeued victim whose
    status line and sentence give the same number (the one in Kueue's message)."""
    victim = reclaim(kubesim, org)
    row = Workload.objects.get(pk=victim.pk)
    kueue_says = kueue_more_needed(row.status_message)
    content = page(org["alice"], victim)
    line, said = status_line(content), sentence(content)
    assert line.startswith("Preempted · requeued · 4 more H100 80GB needed: 4 idle held back by a project you cannot "
                           "see (4)")
    assert said == ("Waiting for 4 x H100 80GB: 4 of the pool's 16 are idle, but a project you cannot see (4) keeps 4 "
                    "of them for non-preemptible work and does not lend them, so only 0 are free to Vision and 4 "
                    "more are needed. You are next in line.")
    same_numbers(line, said, 4)
    assert kueue_says == 4
    for secret in ("Serving", "serving", "Production"):
        assert secret not in content
    data = waiting(signed_in(org["alice"]), victim)
    assert data["reason"] == "not_lendable" and data["numbers"]["held_back_by"] == [{"project": None, "units": 4}]
    assert (data["numbers"]["pool_used"], data["numbers"]["pool_idle"], data["numbers"]["more_needed"]) == (12, 4, 4)
    admin = page(org["admin"], victim)
    assert "4 idle held back by Serving (4)" in text(admin)
    # The dashboard agrees: the pool's 16 hold 12, and Serving lends nothing of its idle 4.
    (h100,) = [d for d in quota_dashboard(user=org["admin"]) if d.pool.slug == "h100"]
    assert h100.cluster.used == 12
    serving = next(p for d in h100.departments for p in d.children if p.slug == "serving")
    assert not serving.lends and serving.used == 0 and serving.deserved == 4


def outside_conditions(content):
    """The page without its "Kueue conditions" section (where Kueue's raw words stay)."""
    start = content.find('aria-label="Kueue conditions"')
    if start < 0:
        return content
    return content[:start] + content[content.index("</section>", start):]


def preemption_sentence(content):
    start = content.index("data-preemption")
    return text(content[start:content.index("</p>", start)].split(">", 1)[1])


def test_preempted_then_requeued_has_its_status_filter_and_one_plain_sentence(kubesim, org, watcher):
    """The preempted case: the requeued victim is `requeued` in the list, the filter and the API, and its
    detail page says in one sentence when, by which workload (linked for the lead, who may see NLP; unnamed for
    alice, who may not) and why; no UIDs or cohort paths outside Kueue's conditions."""
    victim = reclaim(kubesim, org)
    reclaimer = Workload.objects.get(project__slug="nlp", name="reclaim")
    event = WorkloadEvent.objects.filter(workload=victim, to_status=Status.PREEMPTED).latest("id")
    assert event.reason == "InCohortReclamation" and "UID" in event.message  # Kueue's own words, kept raw
    when = f"on {(event.cluster_at or event.at).astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC"
    alice = signed_in(org["alice"])
    # The list page and the API find it by its own status, and the "Preempted" filter finds it too.
    for query in ("status=requeued", "status=preempted"):
        listed = alice.get(f"{reverse('workloads:list')}?{query}").content.decode()
        assert f'data-workload="{victim.pk}" data-status="requeued"' in listed
        assert "Preempted · requeued" in listed
        rows = alice.get(f"/api/v1/workloads/?{query}").json()["results"]
        assert [(row["id"], row["status"]) for row in rows] == [(victim.pk, "requeued")]
    assert victim.pk not in {row["id"] for row in alice.get("/api/v1/workloads/?status=queued").json()["results"]}
    data = alice.get(f"/api/v1/workloads/{victim.pk}/").json()
    assert data["status"] == "requeued" and data["waiting"]["numbers"]["preemption_reason"] == "InCohortReclamation"
    # The sentence, for someone who may not see the preemptor, and for someone who may.
    why = "to give back borrowed quota to the project that deserves it."
    content = page(org["alice"], victim)
    assert preemption_sentence(content) == f"Preempted {when} by a workload of a project you cannot see, {why}"
    assert data["waiting"]["preemption"] == preemption_sentence(content)
    assert reverse("workloads:detail", args=[reclaimer.pk]) not in content
    assert status_line(content).startswith("Preempted · requeued · 4 more H100 80GB needed")
    for_lead = page(org["lead"], victim)
    assert preemption_sentence(for_lead) == f"Preempted {when} by #{reclaimer.pk} reclaim (NLP), {why}"
    assert f'<a href="{reverse("workloads:detail", args=[reclaimer.pk])}">#{reclaimer.pk} reclaim</a>' in for_lead
    # Kueue's raw words stay under its conditions: no UIDs or cohort paths anywhere else; and there the preemptor's
    # only for the lead, who may see NLP (alice reads "a workload of a project you cannot see" there too).
    assert "UID" in for_lead and "proj-nlp-h100" in for_lead
    assert "UID" not in content and "proj-nlp" not in content and "a project you cannot see due to" in content
    for shown in (content, for_lead):
        assert 'data-condition="Preempted"' in shown
        readable = outside_conditions(shown)
        assert "UID" not in readable and "preemptor path" not in readable and "InCohortReclamation" not in readable
        assert not re.search(r"/(portal|dept|proj)-[a-z0-9-]+/", readable), re.findall(r"\S*/proj-\S*", readable)


def test_the_pool_physically_full_is_broken_down_by_scope(kubesim, org, watcher):
    holders = [submit(kubesim, org["admin"], project="serving", preemptible=False, name="serve"),
               submit(kubesim, org["carol"], project="forecasting", name="ds"),
               submit(kubesim, org["alice"], name="mine"), submit(kubesim, org["bob"], project="nlp", name="nlp")]
    wait_for(lambda: all(status_of(w) == Status.RUNNING for w in holders))
    more = submit(kubesim, org["alice"], name="more")
    mirrored(**{"proj-serving-h100-guaranteed": 4, "proj-forecasting-h100-elastic": 4, "proj-vision-h100-elastic": 4,
                "proj-nlp-h100-elastic": 4})
    wait_for(lambda: status_of(more) == Status.QUEUED and Workload.objects.get(pk=more.pk).status_reason != "Created")
    alice = text(page(org["alice"], more))
    assert "4 more H100 80GB needed: the pool is full (16 of 16 in use)" in alice
    assert "16 of the pool's 16 are in use (Vision 4, others 12), so 4 more are needed." in alice
    for secret in ("NLP", "Serving", "Forecasting"):
        assert secret not in alice
    lead = waiting(signed_in(org["lead"]), more)
    assert lead["reason"] == "pool_full"
    assert lead["numbers"]["holders"] == [{"project": "NLP", "units": 4}, {"project": "Vision", "units": 4},
                                          {"project": None, "units": 8}]
    admin = waiting(signed_in(org["admin"]), more)
    assert {h["project"] for h in admin["numbers"]["holders"]} == {"Forecasting", "NLP", "Serving", "Vision"}


def test_behind_earlier_work_in_the_queue(kubesim, org, watcher):
    """Positions come from Kueue's visibility API; each waiting run says how many are ahead of it, and the list
    and the project queue show the same sentence. (Kueue admits whatever fits in the same pass, so a settled
    kubesim never shows room and a queue at once: the `behind` reason itself is covered by the mirror-level test.)"""
    alice = org["alice"]
    for i in range(2):
        submit(kubesim, alice, name=f"r-{i}")
    waits = [submit(kubesim, alice, name=f"w-{i}") for i in range(4)]
    wait_for(lambda: [Workload.objects.get(pk=w.pk).queue_position_local for w in waits] == [0, 1, 2, 3])
    mirrored(**{"proj-vision-h100-elastic": 8})
    client = signed_in(alice)
    for position, workload in enumerate(waits):
        data = waiting(client, workload)
        assert data["numbers"]["ahead"] == data["numbers"]["position"] == position
    listing = text(client.get(reverse("workloads:list")).content.decode())
    queue = text(client.get(reverse("workloads:project_queue", args=["vision"])).content.decode())
    for phrase in ("3 workloads are ahead of you.", "1 workload is ahead of you.", "You are next in line."):
        assert phrase in listing and phrase in queue


def test_a_waiting_gang_says_how_many_pods_on_how_many_nodes(kubesim, org, watcher):
    """A gang that needs N pods on M nodes. A 4-pod gang of 2 H100 each waits behind Vision's limit; the
    watcher's node mirror of kubesim's demo nodes (two H100 nodes of 8) gives the node figures, the same in the page,
    the list and the API."""
    alice = org["alice"]
    running = [submit(kubesim, alice, name=f"r-{i}") for i in range(2)]
    gang = submit(kubesim, alice, gpus=2, pods=4, name="gang")
    wait_for(lambda: all(status_of(w) == Status.RUNNING for w in running))
    wait_for(lambda: Workload.objects.get(pk=gang.pk).queue_position_local == 0)
    mirrored(**{"proj-vision-h100-elastic": 8})
    assert NodeState.objects.filter(node_pool__slug="h100", ready=True, unschedulable=False).count() == 2
    content = page(alice, gang)
    line, said = status_line(content), sentence(content)
    assert said.startswith("Waiting for 8 x H100 80GB (4 pods of 2 each, admitted together; 2 of the pool's 2 nodes "
                           "can host such a pod): Vision is at its limit there, 8 of 8 in use")
    same_numbers(line, said, 8)
    assert status_of(gang) == Status.QUEUED
    data = waiting(signed_in(alice), gang)
    assert data["reason"] == "project_limit" and data["sentence"] == said
    numbers = data["numbers"]
    assert (numbers["pods"], numbers["gpus_per_pod"], numbers["pool_nodes"], numbers["nodes_hosting_a_pod"]) == (
        4, 2, 2, 2)
    listing = text(signed_in(alice).get(reverse("workloads:list")).content.decode())
    assert "4 pods of 2 each, admitted together; 2 of the pool's 2 nodes can host such a pod" in listing


def test_a_held_queue_says_so(kubesim, cluster, org, watcher):
    cluster.patch("LocalQueue", "elastic-h100", {"spec": {"stopPolicy": "Hold"}}, namespace="proj-vision")
    wait_for(lambda: LocalQueueState.objects.filter(name="elastic-h100", namespace="proj-vision",
                                                    active=False).exists())
    held = submit(kubesim, org["alice"], name="held")
    wait_for(lambda: Workload.objects.get(pk=held.pk).status_reason not in ("", "Created"))
    data = waiting(signed_in(org["alice"]), held)
    assert data["reason"] == "queue_stopped" and "on hold by an admin" in data["sentence"]
    assert data["headline"] == "The elastic-h100 queue is on hold"


def test_no_quota_on_the_pool_any_more(kubesim, cluster, org, watcher):
    # Vision's limit there, as two pods of a node's 8 shares each: one 16-share pod fits on no node.
    filler = submit(kubesim, org["alice"], pool="l40s-shared", gpus=8, pods=2, name="fill")
    wait_for(lambda: status_of(filler) == Status.RUNNING)
    workload = submit(kubesim, org["alice"], pool="l40s-shared", gpus=4, name="waits")
    wait_for(lambda: Workload.objects.get(pk=workload.pk).status_reason not in ("", "Created"))
    quota = Quota.objects.get(project__slug="vision", node_pool__slug="l40s-shared")
    org_services.quota_delete(actor=org["admin"], quota=quota)
    reconcile(cluster, desired_from_database())
    kubesim.advance(1)
    data = waiting(signed_in(org["alice"]), workload)
    assert data["reason"] == "no_quota" and data["headline"] == "No quota on L40S time-sliced"
    assert "Vision has no quota on L40S time-sliced" in data["sentence"]


def test_work_that_can_never_fit_says_what_to_change(kubesim, org, cluster, watcher):
    """ETL may use 4 H100 (its limit), but Production's only H100 are Serving's, which stopped lending after ETL's
    run was accepted (the submit form refuses it while Serving does not lend): Kueue can never admit it, and the
    sentence says why."""
    serving = Project.objects.get(slug="serving")
    org_services.project_update(actor=org["admin"], project=serving, does_not_lend=False)
    workload = services.workload_submit(
        actor=org["admin"], project=Project.objects.get(slug="etl"), kind=Kind.TRAINING, name="etl",
        image="pytorch/pytorch:2.4.0", command=["sleep", "600"], node_pool=NodePool.objects.get(slug="h100"), gpus=4,
        model_label="resnet", data_class="public", preemptible=True)
    org_services.project_update(actor=org["admin"], project=Project.objects.get(slug="serving"), does_not_lend=True)
    reconcile(cluster, desired_from_database())
    assert tasks.workload_submit.apply(args=[workload.pk]).get() == "submitted"
    kubesim.advance(1)
    wait_for(lambda: status_of(workload) == Status.REJECTED)
    assert Workload.objects.get(pk=workload.pk).status_reason == "ExceedsMaxQuota"
    data = waiting(signed_in(org["admin"]), workload)
    assert data["reason"] == "never_fits" and data["numbers"]["change"] == "not_lendable"
    assert "at most 0 of them can ever be free to ETL, since Serving (4) does not lend" in data["sentence"]
