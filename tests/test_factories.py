"""The factories build rows that pass the models' validation, and refuse shapes the models refuse."""

import pytest
from django.core.exceptions import ValidationError

from apps.accounts.models import Scope
from apps.core.kueue_names import names
from tests.factories import (
    DepartmentFactory,
    NodePoolFactory,
    PriorityClassFactory,
    ProjectFactory,
    QuotaFactory,
    RoleBindingFactory,
    UserFactory,
    WorkloadFactory,
)

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("factory", [NodePoolFactory, DepartmentFactory, PriorityClassFactory, ProjectFactory,
                                     QuotaFactory, RoleBindingFactory, UserFactory, WorkloadFactory])
def test_every_factory_saves_a_valid_row(factory):
    first, second = factory(), factory()
    assert first.pk and second.pk and first.pk != second.pk
    first.full_clean()


def test_projects_are_named_as_the_services_name_them():
    project = ProjectFactory(slug="speech")
    assert project.namespace == names().project_namespace("speech")


def test_scopes_follow_the_target():
    project, department = ProjectFactory(), DepartmentFactory()
    assert RoleBindingFactory(project=project).scope == Scope.PROJECT
    assert RoleBindingFactory(department=department).scope == Scope.DEPARTMENT
    assert RoleBindingFactory().scope == Scope.EVERYTHING
    department_quota = QuotaFactory(project=None, department=department, deserved=2, limit=4)
    assert department_quota.owner == department


@pytest.mark.parametrize(("factory", "values", "message"), [
    (QuotaFactory, {"deserved": 4, "limit": 2}, "The limit cannot be below the deserved quota."),
    (QuotaFactory, {"department": DepartmentFactory}, "A quota belongs to exactly one department or project."),
    (NodePoolFactory, {"slug": "Not A Label"}, ""),
    (WorkloadFactory, {"gpus": -1}, ""),  # 0 is a shape now: a fraction of one GPU on a KAI pool
    (RoleBindingFactory, {"group": None, "user": None}, "Bind the role to a user or to a group, not both."),
])
def test_invalid_shapes_are_refused(factory, values, message):
    values = {key: value() if callable(value) else value for key, value in values.items()}
    with pytest.raises(ValidationError) as refused:
        factory(**values)
    assert message in " ".join(refused.value.messages)


def test_the_outside_trait_is_work_from_outside_as_the_watcher_mirrors_it():
    workload = WorkloadFactory(outside=True)
    assert workload.from_outside and workload.owner is None and workload.priority_class is None
    assert workload.gpu_units == 4 and workload.pod_count == 2 and workload.object_name == workload.name
    assert workload.submitter_label == "outside the portal (kubectl-create)"
    assert WorkloadFactory(outside=True).kueue_uid != workload.kueue_uid
