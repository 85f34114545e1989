"""Filter forms of the GPU-hour pages: period and scope, limited to what the viewer may see."""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta
from typing import Any, cast

from django import forms
from django.utils import timezone

from apps.accounts.access import Action
from apps.core.actors import Actor
from apps.core.http import reference_lookup
from apps.org.models import NodePool
from apps.org.selectors import departments_for, projects_for

from ..reports import (
    MAX_BUCKETS,
    MAX_SPAN,
    OUT_OF_RANGE,
    Filters,
    Granularity,
    Group,
    HolderFilters,
    Window,
    bucket_count,
    day_in_range,
    month_window,
    visible_users,
)

MONTH = re.compile(r"^(\d{4})-(\d{2})$")


def _in_range(value: date | datetime | None) -> Any:
    """A day or moment a report may name (from reports.window.FIRST_DAY to LAST_DAY), or None."""
    if value is not None and not day_in_range(value.date() if isinstance(value, datetime) else value):
        raise forms.ValidationError(OUT_OF_RANGE, code="out_of_range")
    return value


class ScopeChoiceField(forms.ModelChoiceField):
    """A row the viewer may see, named by id or by its slug (username for users); shown by slug. Pages and the API
    share these fields, so one reference means the same row, and is refused with the same message, in both."""

    def __init__(self, *, noun: str, slug_field: str = "slug", **kwargs: Any) -> None:
        kwargs.setdefault("required", False)
        super().__init__(queryset=NodePool.objects.none(), to_field_name=slug_field, **kwargs)
        self.noun, self.slug_field = noun, slug_field

    def label_from_instance(self, obj: Any) -> str:
        return str(getattr(obj, self.slug_field))

    def to_python(self, value: Any) -> Any:
        if value in self.empty_values:
            return None
        lookup = reference_lookup(str(value), name_field=self.slug_field)
        queryset = self.queryset
        assert queryset is not None  # set by the form for its viewer
        found = queryset.filter(**lookup).first() if lookup is not None else None
        if found is None:
            raise forms.ValidationError(f"No {self.noun} {value!r} that you may see.", code="invalid_choice")
        return found


class ReportScopeForm(forms.Form):
    """Which part of the ledger a report covers: department, project, user and pool, among what the viewer sees."""

    error_css_class = "field-error"

    department = ScopeChoiceField(noun="department", empty_label="(all visible)")
    project = ScopeChoiceField(noun="project", empty_label="(all visible)")
    user = ScopeChoiceField(noun="user", slug_field="username", empty_label="(everyone)")
    node_pool = ScopeChoiceField(noun="node pool", empty_label="(all pools)", label="Node pool")

    def __init__(self, *args: Any, viewer: Actor, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.viewer = viewer
        querysets = {
            "department": departments_for(viewer, Action.VIEW).order_by("slug"),
            "project": projects_for(viewer, Action.VIEW).order_by("slug"),
            "user": visible_users(viewer),
            "node_pool": NodePool.objects.order_by("name"),
        }
        for name, queryset in querysets.items():
            if name in self.fields:
                self.choice_field(name).queryset = queryset

    def choice_field(self, name: str) -> forms.ModelChoiceField:
        """A declared model-choice field of this form, typed as one (self.fields holds plain Fields)."""
        return cast(forms.ModelChoiceField, self.fields[name])

    def report_filters(self) -> Filters:
        data = self.cleaned_data
        return Filters(
            department_id=data["department"].pk if data.get("department") else None,
            project_id=data["project"].pk if data.get("project") else None,
            user_id=data["user"].pk if data.get("user") else None,
            node_pool_id=data["node_pool"].pk if data.get("node_pool") else None,
        )


class ReportFilterForm(ReportScopeForm):
    """A calendar month (the default: this month) or a custom range of days, a grouping and a scope."""

    group = forms.ChoiceField(choices=[(g.value, label) for g, label in (
        (Group.PROJECT, "Project"), (Group.DEPARTMENT, "Department"), (Group.USER, "User"), (Group.POOL, "Node pool"),
        (Group.MONTH, "Month"))], required=False, label="Group by")
    month = forms.CharField(required=False, widget=forms.TextInput(attrs={"type": "month"}),
                            help_text="A calendar month, e.g. 2026-03.")
    start = forms.DateField(required=False, label="Or from", widget=forms.DateInput(attrs={"type": "date"}))
    end = forms.DateField(required=False, label="To (inclusive)", widget=forms.DateInput(attrs={"type": "date"}))
    field_order = ["group", "month", "start", "end", "department", "project", "user", "node_pool"]

    def filters(self) -> Filters:
        return self.report_filters()

    def clean_start(self) -> Any:
        return _in_range(self.cleaned_data["start"])

    def clean_end(self) -> Any:
        return _in_range(self.cleaned_data["end"])

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        data["group"] = Group(data.get("group") or Group.PROJECT)
        start, end = data.get("start"), data.get("end")
        if start or end:
            if not (start and end):
                self.add_error("end" if start else "start", "Give both ends of a custom range.")
                return data
            if end < start:
                self.add_error("end", "The end date is before the start date.")
                return data
            window = Window(timezone.make_aware(datetime.combine(start, datetime.min.time())),
                            timezone.make_aware(datetime.combine(end + timedelta(days=1), datetime.min.time())))
            if window.end - window.start > MAX_SPAN:
                self.add_error("end", f"A report spans at most {MAX_SPAN.days} days; choose a shorter period.")
                return data
        elif data.get("month"):
            match = MONTH.match(data["month"])
            if not match or not 1 <= int(match[2]) <= 12:
                self.add_error("month", "Choose a month such as 2026-03.")
                return data
            if not (int(match[1]) >= 1 and day_in_range(date(int(match[1]), int(match[2]), 1))):
                self.add_error("month", OUT_OF_RANGE)
                return data
            window = month_window(int(match[1]), int(match[2]))
        else:
            today = timezone.localdate()
            window = month_window(today.year, today.month)
        data["window"] = window
        return data


class HolderFilterForm(ReportScopeForm):
    """One pool (the first by default), a window of date-times (the last 24 hours by default), project, user, labels."""

    department = None  # type: ignore[assignment]  # the timeline is per pool and project, not per department
    node_pool = ScopeChoiceField(noun="node pool", empty_label=None, label="Node pool")
    start = forms.DateTimeField(required=False, label="From",
                                widget=forms.DateTimeInput(attrs={"type": "datetime-local"}))
    end = forms.DateTimeField(required=False, label="Until",
                              widget=forms.DateTimeInput(attrs={"type": "datetime-local"}))
    model_label = forms.CharField(required=False, max_length=63, label="Model")
    data_class = forms.CharField(required=False, max_length=63, label="Data class")
    field_order = ["node_pool", "start", "end", "project", "user", "model_label", "data_class"]

    def clean_start(self) -> Any:
        return _in_range(self.cleaned_data["start"])

    def clean_end(self) -> Any:
        return _in_range(self.cleaned_data["end"])

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        if self.errors:
            return data
        end = data.get("end") or timezone.now()
        start = data.get("start") or end - timedelta(days=1)
        if end <= start:
            self.add_error("end", "The end must be after the start.")
            return data
        if end - start > MAX_SPAN:
            self.add_error("end", f"A window spans at most {MAX_SPAN.days} days; choose a shorter one.")
            return data
        data["window"] = Window(start, end)
        if data.get("node_pool") is None:
            data["node_pool"] = NodePool.objects.first()
        return data

    def filters(self) -> HolderFilters:
        data = self.cleaned_data
        return HolderFilters(
            node_pool_id=data["node_pool"].pk if data.get("node_pool") else None,
            project_id=data["project"].pk if data.get("project") else None,
            user_id=data["user"].pk if data.get("user") else None,
            model_label=data.get("model_label") or "", data_class=data.get("data_class") or "",
        )


class UseOverTimeForm(ReportScopeForm):
    """A range of days (the last 30 by default), by day or by hour, for the organisation or one department, one pool
    or all; every mistake reported at once, and a range too long for its granularity refused before any work."""

    project = None  # type: ignore[assignment]  # the dashboard is the organisation's or a department's
    user = None  # type: ignore[assignment]
    department = ScopeChoiceField(noun="department", empty_label="(the whole organisation)")
    start = forms.DateField(required=False, label="From", widget=forms.DateInput(attrs={"type": "date"}))
    end = forms.DateField(required=False, label="To (inclusive)", widget=forms.DateInput(attrs={"type": "date"}))
    granularity = forms.ChoiceField(choices=[(Granularity.DAY.value, "By day"), (Granularity.HOUR.value, "By hour")],
                                    required=False, label="Step")
    field_order = ["department", "node_pool", "start", "end", "granularity"]

    DEFAULT_DAYS = 30

    def clean_start(self) -> Any:
        return _in_range(self.cleaned_data["start"])

    def clean_end(self) -> Any:
        return _in_range(self.cleaned_data["end"])

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        granularity = Granularity(data.get("granularity") or Granularity.DAY)
        data["granularity"] = granularity
        if "start" not in data or "end" not in data:
            return data  # already reported beside the field
        today = timezone.localdate()
        end = data["end"] or today
        start = data["start"] or end - timedelta(days=self.DEFAULT_DAYS - 1)
        if end < start:
            self.add_error("end", "The end date is before the start date.")
            return data
        window = Window(timezone.make_aware(datetime.combine(start, datetime.min.time())),
                        timezone.make_aware(datetime.combine(end + timedelta(days=1), datetime.min.time())))
        if window.end - window.start > MAX_SPAN:
            self.add_error("end", f"The dashboard spans at most {MAX_SPAN.days} days; choose a shorter period.")
            return data
        buckets = bucket_count(window, granularity)
        if buckets > MAX_BUCKETS:
            self.add_error("granularity", f"{buckets:,} {granularity.value}s is more than the {MAX_BUCKETS:,} steps a "
                                          f"chart shows; choose by day or a shorter period.")
            return data
        data["window"] = window
        return data

    def filters(self) -> Filters:
        return self.report_filters()
