"""The organisation's list filters: one FilterSet per resource, shared by the pages and the API.

Rows come from the access-scoped selectors; choices (departments, projects) are scoped to the requesting user.
"""

from __future__ import annotations

from typing import Any

import django_filters
from django.db.models import Q

from apps.accounts.access import Action
from apps.core.filters import DayFilter, FilterForm, ReferenceFilter, ScopedFilterSet, StableOrderingFilter
from apps.core.models import AuditEvent

from .models import Budget, NotificationChannel, Policy, Project, Quota
from .selectors import departments_for, node_pools, projects_for

# The object_type values audit_record writes (each audited model's name).
AUDITED_OBJECT_TYPES = ("nodepool", "department", "project", "quota", "priorityclass", "rolebinding", "workload",
                        "workloadtemplate", "kueuesyncstate", "budget", "notificationchannel")


class AuditEventFilterForm(FilterForm):
    """The audit filter's one rule across fields: the window may not end before it starts."""

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if data.get("since") and data.get("until") and data["since"] > data["until"]:
            self.add_error("until", "The end date is before the start date.")
        return data


class AuditEventFilterSet(ScopedFilterSet):
    """The audit log's filters, the same on the page and in the API.

    - `action`: case-insensitive "contains" (`quota` finds quota.create, quota.update, quota.weight, ...);
    - `object_type`: one of AUDITED_OBJECT_TYPES; `object_id`: exact;
    - `actor`: the username, exact;
    - `department`, `project`: id or slug, among those whose audit log the user may read;
    - `since`, `until`: days (YYYY-MM-DD) in the current timezone, both inclusive: `since` from the start of its
      day, `until` through the end of its day (`since=until=2026-01-31` is that whole day);
    - `ordering`: at, action, object_type, actor (newest first by default).
    """

    action = django_filters.CharFilter(lookup_expr="icontains", max_length=60, label="Action",
                                       help_text="Part of the action, any case: quota finds quota.create, ...")
    object_type = django_filters.ChoiceFilter(choices=[(name, name) for name in AUDITED_OBJECT_TYPES],
                                              label="Object type", empty_label="(any)")
    object_id = django_filters.CharFilter(max_length=60, label="Object id")
    actor = django_filters.CharFilter(field_name="actor__username", max_length=150, label="Actor",
                                      help_text="Username")
    department = ReferenceFilter(choices=lambda request: departments_for(request.user, Action.VIEW_AUDIT),
                                 help_text="Department id or slug.")
    project = ReferenceFilter(choices=lambda request: projects_for(request.user, Action.VIEW_AUDIT), select=False,
                              help_text="Project id or slug.")
    since = DayFilter(field_name="at", bound="since", label="From",
                      help_text="A day (YYYY-MM-DD): events from its start on.")
    until = DayFilter(field_name="at", bound="until", label="To",
                      help_text="A day (YYYY-MM-DD): events up to its end.")
    ordering = StableOrderingFilter(
        fields=[("at", "at"), ("action", "action"), ("object_type", "object_type"), ("actor__username", "actor")],
        field_labels={"at": "Time"}, default=("-at", "-id"),
    )

    class Meta:
        model = AuditEvent
        fields: list[str] = []
        form = AuditEventFilterForm


class ProjectFilterSet(ScopedFilterSet):
    """Projects: by department (id or slug, among the departments the user sees); ordered by department and name
    unless asked otherwise."""

    department = ReferenceFilter(choices=lambda request: departments_for(request.user),
                                 help_text="Department id or slug.")
    ordering = StableOrderingFilter(
        fields=[("name", "name"), ("slug", "slug"), ("department__name", "department"), ("created_at", "created_at")],
        default=("department__name", "name", "id"),
    )

    class Meta:
        model = Project
        fields: list[str] = []


class QuotaFilterSet(ScopedFilterSet):
    """Quotas: of a project, of a department itself (not of its projects), or on a node pool; by pool unless asked
    otherwise."""

    project = ReferenceFilter(choices=lambda request: projects_for(request.user),
                              help_text="Quotas of this project (id or slug).")
    department = ReferenceFilter(choices=lambda request: departments_for(request.user),
                                 help_text="Quotas of this department itself (id or slug), not of its projects.")
    node_pool = ReferenceFilter(choices=lambda request: node_pools(),
                                help_text="Quotas on this pool (id or slug).")
    ordering = StableOrderingFilter(
        fields=[("node_pool__slug", "node_pool"), ("deserved", "deserved"), ("limit", "limit"),
                ("over_quota_weight", "over_quota_weight")],
        default=("node_pool__slug", "id"),
    )

    class Meta:
        model = Quota
        fields: list[str] = []


class BudgetFilterSet(ScopedFilterSet):
    """Budgets: of a project, of a department itself (not of its projects), by period, metric and what happens when
    exceeded; by department and project unless asked otherwise."""

    project = ReferenceFilter(choices=lambda request: projects_for(request.user),
                              help_text="Budgets of this project (id or slug).")
    department = ReferenceFilter(choices=lambda request: departments_for(request.user),
                                 help_text="Budgets of this department itself (id or slug), not of its projects.")
    period = django_filters.ChoiceFilter(choices=Budget.Period.choices, empty_label="(any)")
    metric = django_filters.ChoiceFilter(choices=Budget.Metric.choices, empty_label="(any)")
    on_exceed = django_filters.ChoiceFilter(choices=Budget.OnExceed.choices, empty_label="(any)",
                                            label="When exceeded")
    ordering = StableOrderingFilter(
        fields=[("department__name", "department"), ("project__slug", "project"), ("period", "period"),
                ("metric", "metric"), ("amount", "amount")],
        default=("department__name", "project__slug", "period", "metric", "id"),
    )

    class Meta:
        model = Budget
        fields: list[str] = []


class PolicyFilterSet(ScopedFilterSet):
    """Policies: of a project, of a department itself (not of its projects), or the organisation's alone."""

    project = ReferenceFilter(choices=lambda request: projects_for(request.user),
                              help_text="The policy of this project (id or slug).")
    department = ReferenceFilter(choices=lambda request: departments_for(request.user),
                                 help_text="The policy of this department itself (id or slug), not of its projects.")
    organisation = django_filters.BooleanFilter(method="filter_organisation",
                                                help_text="true: only the organisation's policy; false: all but it.")
    ordering = StableOrderingFilter(
        fields=[("department__name", "department"), ("project__slug", "project")],
        default=("department__name", "project__slug", "id"),
    )

    class Meta:
        model = Policy
        fields: list[str] = []

    def filter_organisation(self, queryset: Any, name: str, value: bool | None) -> Any:
        if value is None:
            return queryset
        organisation = Q(department__isnull=True, project__isnull=True)
        return queryset.filter(organisation) if value else queryset.exclude(organisation)


class NotificationChannelFilterSet(ScopedFilterSet):
    """Notification channels: a project's (or only one's own with `mine`), by kind and whether they are on."""

    project = ReferenceFilter(choices=lambda request: projects_for(request.user, Action.EDIT_WEIGHT),
                              help_text="Channels of this project (id or slug).")
    mine = django_filters.BooleanFilter(method="filter_mine", label="Only my own",
                                        help_text="true: only your own channels; false: only projects' channels.")
    kind = django_filters.ChoiceFilter(choices=NotificationChannel.Kind.choices, empty_label="(any)")
    enabled = django_filters.BooleanFilter()
    ordering = StableOrderingFilter(
        fields=[("project__slug", "project"), ("name", "name"), ("kind", "kind")],
        default=("project__slug", "name", "id"),
    )

    class Meta:
        model = NotificationChannel
        fields: list[str] = []

    def filter_mine(self, queryset: Any, name: str, value: bool | None) -> Any:
        if value is None:
            return queryset
        return queryset.filter(project__isnull=True) if value else queryset.filter(project__isnull=False)
