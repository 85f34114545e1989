import pytest

from apps.core.models import AuditEvent
from apps.org.demo import seed_demo
from apps.org.models import Department, NodePool, Project, Quota


def test_seed_is_idempotent(demo):
    counts = (NodePool.objects.count(), Department.objects.count(), Project.objects.count(), Quota.objects.count())
    audit_rows = AuditEvent.objects.count()
    seed_demo()
    assert counts == (3, 3, 6, 27)
    assert (NodePool.objects.count(), Department.objects.count(), Project.objects.count(),
            Quota.objects.count()) == counts
    assert AuditEvent.objects.count() == audit_rows


def test_demo_refused_outside_demo_mode(db, settings):
    from django.contrib.auth import get_user_model
    from django.core.exceptions import ImproperlyConfigured

    get_user_model().objects.all().delete()
    NodePool.objects.filter(quotas__isnull=True).delete()
    settings.DEMO_MODE = False
    with pytest.raises(ImproperlyConfigured, match="refused outside the demo"):
        seed_demo()
    assert not get_user_model().objects.exists()


def test_every_demo_user_has_an_email_address(demo):
    """Notifications need an address: every demo login has one, valid and its own."""
    from django.core.validators import validate_email

    addresses = {user.username: user.email for user in demo.values()}
    for address in addresses.values():
        validate_email(address)
    assert len(set(addresses.values())) == len(addresses)


def test_the_demo_command_seeds_templates_the_form_accepts_and_is_idempotent(demo):
    """`make run`'s seed_demo: the organisation and a few workload templates (each one the Templates form accepts,
    created through the audited service); running it again changes nothing."""
    import io
    import json

    from django.core.management import call_command

    from apps.workloads.forms import WorkloadTemplateForm
    from apps.workloads.models import Kind, WorkloadTemplate

    call_command("seed_demo", stdout=io.StringIO())
    templates = list(WorkloadTemplate.objects.order_by("name"))
    assert {template.kind for template in templates} == {Kind.TRAINING, Kind.NOTEBOOK, Kind.BATCH}
    for template in templates:
        form = WorkloadTemplateForm({"name": f"copy-of-{template.name}", "kind": template.kind,
                                     "description": template.description, "values": json.dumps(template.values)})
        assert form.is_valid(), (template.name, form.errors)
    audited = AuditEvent.objects.filter(action="workload_template.create").count()
    assert audited == len(templates)
    call_command("seed_demo", stdout=io.StringIO())
    assert WorkloadTemplate.objects.count() == len(templates)
    assert AuditEvent.objects.filter(action="workload_template.create").count() == audited


def test_the_demo_command_seeds_budgets_and_a_policy_through_the_audited_services(demo):
    """A newcomer finds the Budgets and Policies pages populated: Research's and Vision's monthly GPU-hour budgets with
    thresholds, and Research's policy; running the command again adds nothing. The test databases' seed has none."""
    import io

    from django.core.management import call_command

    from apps.org.models import Budget, Policy

    assert not Budget.objects.exists() and not Policy.objects.exists()
    call_command("seed_demo", stdout=io.StringIO())
    budgets = sorted((budget.department.slug if budget.department else budget.project.slug, budget.period,
                      budget.metric, tuple(budget.thresholds), budget.on_exceed) for budget in Budget.objects.all())
    assert budgets == [("research", "month", "gpu_hours", (50, 80, 100), "notify"),
                       ("vision", "month", "gpu_hours", (50, 80, 100), "hold_preemptible")]
    [policy] = Policy.objects.all()
    assert policy.department.slug == "research" and policy.max_gpus_per_workload == 8
    audited = AuditEvent.objects.filter(action__in=["budget.create", "policy.create"]).count()
    assert audited == 3
    call_command("seed_demo", stdout=io.StringIO())
    assert (Budget.objects.count(), Policy.objects.count()) == (2, 1)
    assert AuditEvent.objects.filter(action__in=["budget.create", "policy.create"]).count() == audited


def test_the_demo_command_seeds_a_kai_pool_with_fractions_whose_queues_are_valid(demo):
    """make run's seed adds a KAI Scheduler pool (four nodes of four cards, fractions on) with quotas through the
    audited services; the organisation compiles to valid KAI Queues for it and to no Kueue object; running the command
    again adds nothing. The test databases' seed keeps the three Kueue pools."""
    import io

    from django.core.management import call_command

    from tests.crd_schemas import validate_kai_object
    from worker.kai_objects import kai_objects
    from worker.kueue_objects import desired_objects
    from worker.kueue_sync import org_snapshot

    assert not NodePool.objects.filter(scheduler="kai").exists()
    call_command("seed_demo", stdout=io.StringIO())
    pool = NodePool.objects.get(scheduler="kai")
    assert (pool.slug, pool.capacity, pool.gpu_fractions) == ("rtx-pro-6000", 16, True)
    assert Quota.objects.filter(node_pool=pool).count() == 6
    snapshot = org_snapshot()
    queues = [obj for obj in kai_objects(snapshot) if obj["kind"] == "Queue"]  # besides the PriorityClasses
    for queue in queues:
        validate_kai_object(queue)
    assert len(queues) == 2 + 4
    assert not [obj for obj in desired_objects(snapshot) if "rtx-pro-6000" in obj["metadata"]["name"]]
    audited = AuditEvent.objects.count()
    call_command("seed_demo", stdout=io.StringIO())
    assert AuditEvent.objects.count() == audited and Quota.objects.filter(node_pool=pool).count() == 6
