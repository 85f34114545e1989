"""A query compiled once per process answers for every value it is given, as the ORM's own query would."""

from __future__ import annotations

import pytest

from apps.core.prepared import PreparedQuery
from apps.org.models import Project


def test_it_compiles_once_and_answers_each_value_as_the_orm_does(demo):
    built = []

    def build(pk):
        built.append(pk)
        return Project.objects.filter(pk=pk).values_list("slug", "department__slug")[:1]

    query = PreparedQuery(build, values=1)
    for project in Project.objects.all():
        assert query.row(project.pk) == Project.objects.filter(pk=project.pk).values_list(
            "slug", "department__slug").get()
    assert query.row(0) is None
    assert len(built) == 1


def test_several_values_each_reach_their_place(demo):
    query = PreparedQuery(lambda first, second: Project.objects.filter(pk__in=[first, second]).order_by(
        "slug").values_list("slug")[:1], values=2)
    vision, nlp = Project.objects.get(slug="vision"), Project.objects.get(slug="nlp")
    assert query.row(vision.pk, nlp.pk) == ("nlp",)
    assert query.row(vision.pk, 0) == ("vision",)


def test_a_value_the_query_does_not_take_is_refused(demo):
    with pytest.raises(ValueError, match="stand-in"):
        PreparedQuery(lambda pk: Project.objects.filter(slug="vision").values_list("pk")[:1], values=1).row(1)
    with pytest.raises(TypeError):
        PreparedQuery(lambda: Project.objects.values_list("pk")[:1]).row(1)


def test_rows_answers_every_row_as_the_orm_does(demo):
    query = PreparedQuery(lambda department_pk: Project.objects.filter(department_id=department_pk).order_by(
        "slug").values_list("slug", "department_id"), values=1)
    for project in Project.objects.all():
        assert query.rows(project.department_id) == list(Project.objects.filter(
            department_id=project.department_id).order_by("slug").values_list("slug", "department_id"))
    assert query.rows(0) == []
