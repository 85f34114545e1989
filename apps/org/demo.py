"""The demo organisation (README, Quick start): a mixed cluster, three departments, one login per role."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction

from apps.accounts.models import Role, RoleBinding, Scope
from apps.accounts.services import role_binding_create
from apps.core.actors import Actor

from . import services
from .models import Budget, Department, NodePool, Policy, PriorityClass, Project, Quota

DEMO_PASSWORD = "demo"  # noqa: S105 - only ever set in demo mode, see seed_demo()

POOLS = [
    {"slug": "h100", "name": "H100 80GB", "gpu_resource": "nvidia.com/gpu", "gpu_product": "NVIDIA-H100-80GB-HBM3",
     "cut": NodePool.Cut.FULL, "capacity": 16, "node_labels": {"portal.gpu/pool": "h100"},
     "card_fraction_numerator": 1, "card_fraction_denominator": 1,
     "description": "Full H100 cards for large training runs."},
    {"slug": "a100-mig-3g40gb", "name": "A100 MIG 3g.40gb", "gpu_resource": "nvidia.com/mig-3g.40gb",
     "gpu_product": "NVIDIA-A100-SXM4-80GB", "cut": NodePool.Cut.MIG, "mig_profile": "3g.40gb", "capacity": 16,
     "node_labels": {"portal.gpu/pool": "a100-mig-3g40gb"}, "card_fraction_numerator": 3,
     "card_fraction_denominator": 7, "description": "A100 cards cut into 3g.40gb MIG slices."},
    {"slug": "l40s-shared", "name": "L40S time-sliced", "gpu_resource": "nvidia.com/gpu",
     "gpu_product": "NVIDIA-L40S-SHARED", "cut": NodePool.Cut.TIME_SLICED, "replicas_per_card": 8, "capacity": 48,
     "node_labels": {"portal.gpu/pool": "l40s-shared"}, "card_fraction_numerator": 1,
     "card_fraction_denominator": 8, "description": "L40S cards shared eight ways, for notebooks and light work."},
]

PRIORITY_CLASSES = [
    {"name": "train", "value": 50, "preemptible": True, "description": "Training: preemptible by default."},
    {"name": "interactive-preemptible", "value": 75, "preemptible": True,
     "description": "Notebooks that may be preempted."},
    {"name": "build", "value": 100, "preemptible": False, "description": "Interactive build work, not preemptible."},
    {"name": "inference", "value": 125, "preemptible": False, "description": "Serving, never preempted."},
]

# department slug -> (name, {pool: (deserved, limit, weight)}, [(project slug, name, does_not_lend, quotas)])
DEPARTMENTS: list[tuple[str, str, dict[str, tuple[int, int | None, int]], list[tuple[str, str, bool, dict]]]] = [
    ("research", "Research",
     {"h100": (8, 12, 2), "a100-mig-3g40gb": (6, 10, 2), "l40s-shared": (16, 32, 2)},
     [("vision", "Vision", False, {"h100": (4, 8, 2), "a100-mig-3g40gb": (3, 6, 1), "l40s-shared": (8, 16, 1)}),
      ("nlp", "NLP", False, {"h100": (4, 8, 1), "a100-mig-3g40gb": (3, 6, 1), "l40s-shared": (8, 16, 1)})]),
    ("production", "Production",
     {"h100": (4, 4, 1), "a100-mig-3g40gb": (4, 8, 1), "l40s-shared": (16, 24, 1)},
     [("serving", "Serving", True, {"h100": (4, 4, 1), "a100-mig-3g40gb": (2, 4, 1), "l40s-shared": (8, 8, 1)}),
      ("etl", "ETL", False, {"h100": (0, 4, 1), "a100-mig-3g40gb": (2, 4, 1), "l40s-shared": (8, 16, 1)})]),
    ("data-science", "Data Science",
     {"h100": (4, 8, 1), "a100-mig-3g40gb": (6, 10, 1), "l40s-shared": (16, 32, 1)},
     [("forecasting", "Forecasting", False,
       {"h100": (2, 6, 1), "a100-mig-3g40gb": (4, 8, 1), "l40s-shared": (8, 16, 1)}),
      ("analytics", "Analytics", False, {"h100": (2, 4, 1), "a100-mig-3g40gb": (2, 4, 1), "l40s-shared": (8, 16, 1)})]),
]


@dataclass(frozen=True)
class DemoUser:
    username: str
    role: str
    department: str | None = None
    project: str | None = None


USERS = [
    DemoUser("admin", Role.ADMIN),
    DemoUser("deptadmin", Role.DEPARTMENT_ADMIN, department="research"),
    DemoUser("lead", Role.TEAM_LEAD, department="research"),
    DemoUser("alice", Role.RESEARCHER, project="vision"),
    DemoUser("bob", Role.RESEARCHER, project="nlp"),
    DemoUser("carol", Role.RESEARCHER, project="forecasting"),
    DemoUser("viewer", Role.VIEWER),
]


def demo_email(username: str) -> str:
    """A demo login's address, in a domain reserved for examples (RFC 2606): mail to it goes nowhere."""
    return f"{username}@gpu-portal.example"


def seed_demo() -> list[DemoUser]:
    """Create (or complete) the demo organisation; running it again changes nothing."""
    if not settings.DEMO_MODE:
        raise ImproperlyConfigured("Demo logins with a shared password are refused outside the demo/embedded mode.")
    user_model = get_user_model()
    with transaction.atomic():
        admin, _ = user_model.objects.get_or_create(username="admin", defaults={"is_staff": True, "is_superuser": True})
        if not RoleBinding.objects.filter(user=admin, role=Role.ADMIN, scope=Scope.EVERYTHING).exists():
            # The first admin cannot be granted by anyone: bootstrap it directly.
            RoleBinding.objects.create(user=admin, role=Role.ADMIN, scope=Scope.EVERYTHING)
        for spec in PRIORITY_CLASSES:
            if not PriorityClass.objects.filter(name=spec["name"]).exists():
                services.priority_class_create(actor=admin, **spec)
        pools = {}
        for spec in POOLS:
            pools[spec["slug"]] = NodePool.objects.filter(slug=spec["slug"]).first() or services.node_pool_create(
                actor=admin, **spec
            )
        train = PriorityClass.objects.get(name="train")
        for dept_slug, dept_name, dept_quotas, projects in DEPARTMENTS:
            department = Department.objects.filter(slug=dept_slug).first() or services.department_create(
                actor=admin, slug=dept_slug, name=dept_name
            )
            for pool_slug, (deserved, limit, weight) in dept_quotas.items():
                _ensure_quota(admin, pools[pool_slug], deserved, limit, weight, department=department)
            for project_slug, project_name, does_not_lend, project_quotas in projects:
                project = Project.objects.filter(slug=project_slug).first() or services.project_create(
                    actor=admin, department=department, slug=project_slug, name=project_name,
                    does_not_lend=does_not_lend, default_priority_class=train,
                )
                for pool_slug, (deserved, limit, weight) in project_quotas.items():
                    _ensure_quota(admin, pools[pool_slug], deserved, limit, weight, project=project)
        for demo in USERS:
            user, _ = user_model.objects.get_or_create(username=demo.username)
            user.set_password(DEMO_PASSWORD)
            user.email = user.email or demo_email(demo.username)  # notifications need an address
            user.save(update_fields=["password", "email"])
            scope: dict[str, Any] = {}
            if demo.department:
                scope["department"] = Department.objects.get(slug=demo.department)
            if demo.project:
                scope["project"] = Project.objects.get(slug=demo.project)
            exists = RoleBinding.objects.filter(
                user=user, role=demo.role, department=scope.get("department"), project=scope.get("project")
            ).exists()
            if not exists:
                role_binding_create(actor=admin, role=demo.role, user=user, **scope)
    return USERS


# Spend governance a newcomer sees populated (make run's seed_demo command only: the test databases' seed leaves it
# out, so tests start with no budgets or policies). Research's month of GPU-hours caps its projects' budgets; Vision's
# own budget holds its preemptible work when spent; Research's policy limits what its work may ask for.
DEMO_BUDGETS: list[dict[str, Any]] = [
    {"department": "research", "period": Budget.Period.MONTH, "metric": Budget.Metric.GPU_HOURS,
     "amount": Decimal("2000"), "thresholds": [50, 80, 100], "on_exceed": Budget.OnExceed.NOTIFY},
    {"project": "vision", "period": Budget.Period.MONTH, "metric": Budget.Metric.GPU_HOURS,
     "amount": Decimal("500"), "thresholds": [50, 80, 100], "on_exceed": Budget.OnExceed.HOLD_PREEMPTIBLE},
]
DEMO_POLICY: dict[str, Any] = {"department": "research", "max_gpus_per_workload": 8,
                               "max_runtime_seconds": 7 * 24 * 3600, "default_runtime_seconds": 24 * 3600,
                               "max_notebook_idle_minutes": 120}


def seed_demo_spend() -> tuple[list[Budget], list[Policy]]:
    """The demo's budgets and policy, created by the demo admin through the audited services where their scope has
    none yet; running it again changes nothing."""
    admin = get_user_model().objects.get(username="admin")
    with transaction.atomic():
        for spec in DEMO_BUDGETS:
            owner = _demo_owner(spec)
            exists = Budget.objects.filter(period=spec["period"], metric=spec["metric"], **owner).exists()
            if not exists:
                services.budget_create(actor=admin, **{**spec, **owner})
        owner = _demo_owner(DEMO_POLICY)
        if not Policy.objects.filter(**owner).exists():
            services.policy_create(actor=admin, **{**DEMO_POLICY, **owner})
    budgets = [Budget.objects.get(period=spec["period"], metric=spec["metric"], **_demo_owner(spec))
               for spec in DEMO_BUDGETS]
    return budgets, list(Policy.objects.filter(**_demo_owner(DEMO_POLICY)))


# A pool KAI Scheduler schedules, with GPU fractions for notebooks (README, Kueue and KAI in one cluster): four nodes
# of four cards. make run's seed_demo command only: the test databases' seed keeps the three Kueue pools that the
# tests count. Its nodes carry KAI's shard label with the pool's slug, as its Queues do.
KAI_POOL: dict[str, Any] = {
    "slug": "rtx-pro-6000", "name": "RTX PRO 6000 96GB", "gpu_resource": "nvidia.com/gpu",
    "gpu_product": "NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition", "cut": NodePool.Cut.FULL, "capacity": 16,
    "node_labels": {"portal.gpu/pool": "rtx-pro-6000", "kai.scheduler/node-pool": "rtx-pro-6000"},
    "scheduler": NodePool.Scheduler.KAI, "gpu_fractions": True,
    "description": "RTX PRO 6000 cards scheduled by KAI Scheduler, shared as GPU fractions by notebooks.",
}
# owner slug -> (deserved, limit, weight) on the KAI pool; departments first.
KAI_QUOTAS: dict[str, tuple[int, int | None, int]] = {
    "research": (8, None, 2), "data-science": (8, 16, 1),
    "vision": (4, None, 1), "nlp": (4, 8, 1), "forecasting": (4, 8, 1), "analytics": (4, 8, 1),
}


def seed_demo_kai_pool() -> NodePool:
    """The demo's KAI pool and its quotas, created by the demo admin through the audited services where missing;
    running it again changes nothing."""
    admin = get_user_model().objects.get(username="admin")
    with transaction.atomic():
        pool = NodePool.objects.filter(slug=KAI_POOL["slug"]).first() or services.node_pool_create(
            actor=admin, **KAI_POOL)
        for slug, (deserved, limit, weight) in KAI_QUOTAS.items():
            department = Department.objects.filter(slug=slug).first()
            owner = {"department": department} if department else {"project": Project.objects.get(slug=slug)}
            _ensure_quota(admin, pool, deserved, limit, weight, **owner)
    return pool


def _demo_owner(spec: dict[str, Any]) -> dict[str, Any]:
    if "project" in spec:
        return {"project": Project.objects.get(slug=spec["project"])}
    return {"department": Department.objects.get(slug=spec["department"])}


def _ensure_quota(admin: Actor, pool: NodePool, deserved: int, limit: int | None, weight: int, **owner: Any) -> None:
    if not Quota.objects.filter(node_pool=pool, **owner).exists():
        services.quota_set(actor=admin, node_pool=pool, deserved=deserved, limit=limit, over_quota_weight=weight,
                           **owner)
