"""The workload list's filters: one FilterSet for the list page and the API list."""

from __future__ import annotations

from typing import Any

import django_filters
from django.db.models import Q, QuerySet
from django.http import QueryDict

from apps.core.filters import ChoiceListFilter, IdOrNameFilter, ReferenceFilter, ScopedFilterSet, StableOrderingFilter
from apps.org.selectors import departments_for, projects_for

from .models import LIVE_STATUSES, PREEMPTED_STATUSES, Kind, Origin, Status, Workload

SEARCH_WORDS = 8  # more words than this narrow nothing a person would notice; the rest are ignored
SCOPES = [("mine", "My workloads"), ("all", "All I can see")]  # short: the select is a filter column wide
# "Preempted" finds the requeued too: both were preempted and are not running again yet.
STATUS_CHOICES = [(value, "Preempted (stopping or requeued)" if value == Status.PREEMPTED else label)
                  for value, label in Status.choices]


class WorkloadFilterSet(ScopedFilterSet):
    """Workloads the user may see, filtered the same on the list page and in the API.

    - `scope`: `mine` (the user's own) or `all` (everything they may see). Without it the entry point decides: the
      API lists everything; the page starts submitters on their own work and viewers on everything, and offers the
      switch only to those who may stop others' work (`offer_scope`); without the switch it ignores the parameter,
      and `owner` with it when the page shows only the user's own work;
    - `status`: one or several, comma-separated; `live` stands for every status before a final one, `preempted` for
      every preempted workload not admitted again yet (its pods stopping, or `requeued`: back in the queue);
    - `kind`: one or several, comma-separated: the portal's forms and the kinds of work from outside it;
    - `origin`: `portal` (submitted in the portal) or `outside` (mirrored from the cluster);
    - `q`: words that must each appear in the name, image, project, department or creator (any case; the creator as
      the list shows it, "outside the portal (<Kubernetes user>)" for work from outside no user is named on);
    - `project`, `department`: id or slug, among those the user sees;
    - `owner`: id or username;
    - `ordering`: created_at (age), name, status, kind, project, department, node_pool, owner, gpus (units
      requested), position (in the ClusterQueue); newest first by default. `owner` sorts by the creator as the list
      shows it, so work from outside sits among the usernames as "outside the portal (...)".
    """

    q = django_filters.CharFilter(method="search", label="Search", max_length=100,
                                  help_text="Words found in the name, image, project, department or creator.")

    status = ChoiceListFilter(choices=[("live", "Live (not finished)"), *STATUS_CHOICES], noun="status",
                              aliases={"live": LIVE_STATUSES, Status.PREEMPTED: PREEMPTED_STATUSES}, label="Status")
    kind = ChoiceListFilter(choices=Kind.choices, noun="kind", label="Kind")
    origin = django_filters.ChoiceFilter(choices=Origin.choices, label="Origin", empty_label="(any)",
                                         help_text="portal: submitted in the portal; outside: submitted outside it.")
    project = ReferenceFilter(choices=lambda request: projects_for(request.user).order_by("name"),
                              help_text="Project id or slug.")
    department = ReferenceFilter(field_name="project__department",
                                 choices=lambda request: departments_for(request.user).order_by("name"),
                                 help_text="Department id or slug.")
    scope = django_filters.ChoiceFilter(choices=SCOPES, label="Show", empty_label=None, method="scope_applied_later",
                                        help_text="mine: your own workloads; all: every workload you may see.")
    owner = IdOrNameFilter(name_field="username", help_text="Owner id or username.")
    ordering = StableOrderingFilter(
        fields=[("created_at", "created_at"), ("name", "name"), ("status", "status"), ("kind", "kind"),
                ("project__slug", "project"), ("project__department__slug", "department"),
                ("node_pool__slug", "node_pool"), ("creator", "owner"), ("requested_gpus", "gpus"),
                ("queue_position_cluster", "position")],
        default=("-created_at", "-id"),
    )

    class Meta:
        model = Workload
        fields: list[str] = []

    def __init__(self, data: QueryDict | None = None, *args: Any, offer_scope: bool = True, default_scope: str = "all",
                 **kwargs: Any) -> None:
        if offer_scope and data is not None and not data.get("scope"):
            # The switch shows the scope the list is in: without a choice, the entry point's default (a lead lands on
            # everything in scope, and the select must not say "My workloads" above it).
            data = data.copy()
            data["scope"] = default_scope
        super().__init__(data, *args, **kwargs)
        self.default_scope = default_scope
        if not offer_scope:
            del self.filters["scope"]
            if default_scope == "mine":
                del self.filters["owner"]

    @property
    def effective_scope(self) -> str:
        """`mine` or `all`: the one asked for (when offered and valid), else the entry point's default."""
        chosen = self.form.cleaned_data.get("scope") if self.is_valid() else None
        return chosen or self.default_scope

    def search(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        """Every word must match one of the row's texts (`workload_list` joins them and annotates the creator, so no
        query is added)."""
        for word in value.split()[:SEARCH_WORDS]:
            queryset = queryset.filter(Q(name__icontains=word) | Q(image__icontains=word)
                                       | Q(project__slug__icontains=word) | Q(project__name__icontains=word)
                                       | Q(project__department__slug__icontains=word)
                                       | Q(creator__icontains=word))
        return queryset

    def scope_applied_later(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return queryset  # filter_queryset applies the scope, the default included

    def filter_queryset(self, queryset: QuerySet) -> QuerySet:
        queryset = super().filter_queryset(queryset)
        return queryset.filter(owner=self.request.user) if self.effective_scope == "mine" else queryset
