"""factory_boy factories for rows in shapes the demo organisation does not have.

Every factory saves through `full_clean()` first, so what it builds passes the models' field validators and database
constraints (a quota has exactly one owner, a limit at least its deserved quota, a binding its scope's target, ...).
They write rows directly: no audit row, no cross-row service rules (projects within their department's quota) —
tests that are about those go through the services or use the demo organisation.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import factory
from django.contrib.auth import get_user_model
from factory.django import DjangoModelFactory

from apps.accounts.models import Role, RoleBinding, Scope
from apps.core.kueue_names import names
from apps.org import signals as org_signals
from apps.org.models import Department, NodePool, PriorityClass, Project, Quota
from apps.workloads.models import Kind, Origin, Status, Workload

PASSWORD = "factory-password"


class ValidFactory(DjangoModelFactory):
    """Validates each row as a form would (fields, validators, constraints) before saving it."""

    class Meta:
        abstract = True

    @classmethod
    def _create(cls, model_class: type, *args: Any, **kwargs: Any) -> Any:
        obj = model_class(*args, **kwargs)
        obj.full_clean()
        obj.save()
        return obj


class UserFactory(ValidFactory):
    class Meta:
        model = get_user_model()

    username = factory.Sequence(lambda n: f"user-{n}")
    password = factory.django.Password(PASSWORD)


class NodePoolFactory(ValidFactory):
    class Meta:
        model = NodePool

    slug = factory.Sequence(lambda n: f"pool-{n}")
    name = factory.LazyAttribute(lambda pool: pool.slug.upper())
    gpu_resource = "nvidia.com/gpu"
    capacity = 8
    node_labels = factory.LazyAttribute(lambda pool: {"portal.gpu/pool": pool.slug})


class DepartmentFactory(ValidFactory):
    class Meta:
        model = Department

    slug = factory.Sequence(lambda n: f"department-{n}")
    name = factory.LazyAttribute(lambda department: f"Department {department.slug}")


class PriorityClassFactory(ValidFactory):
    class Meta:
        model = PriorityClass

    name = factory.Sequence(lambda n: f"priority-{n}")
    value = factory.Sequence(lambda n: 1000 + n)
    preemptible = True


class ProjectFactory(ValidFactory):
    """A project whose namespace follows the installation's naming, as project_create gives it."""

    class Meta:
        model = Project

    slug = factory.Sequence(lambda n: f"project-{n}")
    name = factory.LazyAttribute(lambda project: f"Project {project.slug}")
    department = factory.SubFactory(DepartmentFactory)
    namespace = factory.LazyAttribute(lambda project: names().project_namespace(project.slug))


class QuotaFactory(ValidFactory):
    """A project's quota on a new pool by default; pass `department=` (and `project=None`) for a department's.
    It announces its deserved units as the quota services do, so the usage ledger has the quota's period."""

    class Meta:
        model = Quota

    @classmethod
    def _create(cls, model_class: type, *args: Any, **kwargs: Any) -> Any:
        quota = super()._create(model_class, *args, **kwargs)
        org_signals.quota_deserved_changed.send(sender=Quota, quota=quota, deserved=quota.deserved)
        return quota

    node_pool = factory.SubFactory(NodePoolFactory)
    project = factory.SubFactory(ProjectFactory)
    department = None
    deserved = 0
    limit = None
    over_quota_weight = Decimal(1)


class RoleBindingFactory(ValidFactory):
    """A user's binding; the scope follows the target given (`project=`, `department=`, or neither: everything)."""

    class Meta:
        model = RoleBinding

    user = factory.SubFactory(UserFactory)
    group = None
    role = Role.VIEWER
    department = None
    project = None
    scope = factory.LazyAttribute(
        lambda binding: Scope.PROJECT if binding.project else Scope.DEPARTMENT if binding.department
        else Scope.EVERYTHING)


class WorkloadFactory(ValidFactory):
    """A training run as a row (no Job): on a new project and pool unless given; status `submitting` by default."""

    class Meta:
        model = Workload

    project = factory.SubFactory(ProjectFactory)
    owner = factory.SubFactory(UserFactory)
    kind = Kind.TRAINING
    name = factory.Sequence(lambda n: f"run-{n}")
    image = "pytorch/pytorch:2.4.0"
    command = factory.LazyFunction(lambda: ["sleep", "60"])
    node_pool = factory.SubFactory(NodePoolFactory)
    gpus = 1
    priority_class = factory.SubFactory(PriorityClassFactory)
    preemptible = True
    model_label = "resnet"
    data_class = "public"

    class Params:
        # Work submitted outside the portal as the watcher mirrors it (apps.workloads.services.outside): a kubectl
        # Job of two pods with two GPUs each, no owner, no priority class, no audit labels, queued in Kueue.
        outside = factory.Trait(
            origin=Origin.OUTSIDE, kind=Kind.JOB, owner=None, priority_class=None, command=[], model_label="",
            data_class="", status=Status.QUEUED, status_reason="SubmittedOutside", pods=2, gpus=2,
            name=factory.Sequence(lambda n: f"kubectl-{n}"), object_name=factory.SelfAttribute("name"),
            object_api_version="batch/v1", submitted_by="kubectl-create", kueue_priority=0,
            kueue_uid=factory.Sequence(lambda n: f"0f0e0d0c-0000-4000-8000-{n:012d}"),
            kueue_name=factory.LazyAttribute(lambda w: f"job-{w.name}-0f0e0"),
            pod_sets=factory.LazyFunction(lambda: [{"name": "main", "count": 2, "gpus": 2, "cpu": "2.000",
                                                    "memory_gib": "8.00"}]),
            pod_set_units=4,
        )

    @classmethod
    def _create(cls, model_class: type, *args: Any, **kwargs: Any) -> Any:
        obj = model_class(*args, **kwargs)
        # The mirror writes what the cluster says: no audit labels for work from outside (a form requires them).
        obj.full_clean(exclude=["model_label", "data_class"] if obj.origin == Origin.OUTSIDE else None)
        obj.save()
        return obj
