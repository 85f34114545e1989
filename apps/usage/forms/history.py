"""The quota history's choice of project, pool and span: choices limited to what the viewer may see."""

from __future__ import annotations

from typing import Any

from django import forms

from apps.core.actors import Actor
from apps.org.models import NodePool, Project, Quota
from apps.org.selectors import projects_for

from ..history import SPANS


class QuotaHistoryForm(forms.Form):
    """Project and pool by slug (a project the viewer may not see reads as not existing); the span of SPANS.

    Unbound fields default to the viewer's first project and that project's first pool with a quota."""

    project = forms.CharField(max_length=100, required=False)
    pool = forms.CharField(max_length=100, required=False)
    span = forms.ChoiceField(choices=[(key, label) for key, (label, _, _) in SPANS.items()], required=False)

    def __init__(self, data: Any, *, viewer: Actor) -> None:
        super().__init__(data)
        self.projects = projects_for(viewer).select_related("department").order_by("name")

    def clean_project(self) -> Project:
        slug = self.cleaned_data["project"]
        project = self.projects.filter(slug=slug).first() if slug else self.projects.first()
        if project is None:
            raise forms.ValidationError(
                "No such project among those you may see." if slug else "You may see no project."
            )
        return project

    def clean_span(self) -> str:
        return self.cleaned_data["span"] or "week"

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        project = data.get("project")
        if project is None or "pool" not in data:
            return data
        slug = data["pool"]
        pools = NodePool.objects.filter(pk__in=Quota.objects.filter(project=project).values("node_pool_id"))
        pool = pools.filter(slug=slug).first() if slug else pools.order_by("name").first()
        if pool is None:
            self.add_error(
                "pool",
                f"{project.name} has no quota on that pool." if slug else f"{project.name} has no quota on any pool.",
            )
        else:
            data["pool"] = pool
        return data

    def pool_choices(self) -> list[NodePool]:
        """The pools the chosen project has a quota on (after validation)."""
        project = getattr(self, "cleaned_data", {}).get("project")
        if not isinstance(project, Project):
            return []
        return list(
            NodePool.objects.filter(pk__in=Quota.objects.filter(project=project).values("node_pool_id")).order_by(
                "name"
            )
        )
