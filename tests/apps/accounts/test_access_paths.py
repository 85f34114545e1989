"""The access paths every scoped model declares (apps.core.scopes) name real lookups that end where they say: a
typo in a path string, or a path that stops at the wrong model, fails here rather than as a silent empty page."""

import pytest
from django.apps import apps
from django.conf import settings
from django.core.exceptions import FieldDoesNotExist
from django.db.models import Model

from apps.core.scopes import AccessPaths
from apps.org.models import Quota

# What each kind of path must end at.
DEPARTMENT, PROJECT = "org.Department", "org.Project"


def _target(model: type[Model], path: str) -> type[Model]:
    """The model whose row `path` (a queryset lookup such as "project__department_id") names, walking `_meta`."""
    *relations, last = path.split("__")
    for name in relations:
        field = model._meta.get_field(name)
        if not field.is_relation or field.related_model is None:
            raise FieldDoesNotExist(f"{model.__name__}.{name} is no relation, in {path!r}")
        model = field.related_model
    if last == "pk":
        return model
    field = model._meta.get_field(last)  # a field's name or its column's attname (department_id)
    if not field.is_relation or field.related_model is None:
        raise FieldDoesNotExist(f"{model.__name__}.{last} names no row, in {path!r}")
    return field.related_model


def _scoped_models() -> list[type[Model]]:
    return [model for model in apps.get_models() if isinstance(getattr(model, "access_paths", None), AccessPaths)]


def test_the_scoped_models_are_all_found():
    names = {model._meta.label for model in _scoped_models()}
    assert names >= {"org.Department", "org.Project", "org.Quota", "org.DataSource", "org.ImagePullSecret",
                     "workloads.Workload", "workloads.Credential", "workloads.WorkloadUtilisation",
                     "usage.UsageInterval", "usage.DeservedPeriod", "usage.UsageSlice", "usage.UtilisationHour",
                     "cluster.ClusterQueueState", "cluster.LocalQueueState", "cluster.CohortState", "core.AuditEvent"}


@pytest.mark.parametrize("model", _scoped_models(), ids=lambda model: model._meta.label)
def test_each_declared_path_names_a_real_lookup_of_its_model(model):
    paths: AccessPaths = model.access_paths
    assert paths.departments or paths.project or paths.owner, "a scoped model hangs off the tree somewhere"
    for path in (*paths.departments, paths.member_department):
        if path is not None:
            assert _target(model, path)._meta.label == DEPARTMENT, path
    if paths.project is not None:
        assert _target(model, paths.project)._meta.label == PROJECT, paths.project
    if paths.owner is not None:
        assert _target(model, paths.owner)._meta.label == settings.AUTH_USER_MODEL, paths.owner


@pytest.mark.parametrize("model", [model for model in apps.get_models() if model.__module__.startswith("apps.")],
                         ids=lambda model: model._meta.label)
def test_no_model_keeps_paths_outside_access_paths(model):
    """A path declared beside `access_paths` (the old loose attributes, or a misspelt one) would never be read."""
    assert not [name for name in vars(model) if name.startswith("access_") and name not in {"access_paths",
                                                                                           "access_scope"}]


@pytest.mark.parametrize("path", ["departmnt_id", "project__departmnt_id", "name", "project__name"])
def test_a_misspelt_or_dead_end_path_is_refused(path):
    with pytest.raises(FieldDoesNotExist):
        _target(Quota, path)
