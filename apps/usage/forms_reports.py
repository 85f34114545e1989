"""Filter forms of the GPU-hour pages: period and scope, limited to what the viewer may see."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any, cast

from django import forms
from django.utils import timezone

from apps.accounts.access import Action
from apps.org.models import NodePool
from apps.org.selectors import departments_for, projects_for

from .reports import MAX_SPAN, Filters, Group, HolderFilters, Window, month_window, visible_users

MONTH = re.compile(r"^(\d{4})-(\d{2})$")


class _SlugChoiceField(forms.ModelChoiceField):
    """Rows offered by their slug."""

    def label_from_instance(self, obj: Any) -> str:
        return obj.slug


class _UsernameChoiceField(forms.ModelChoiceField):
    """Users offered by their login name."""

    def label_from_instance(self, obj: Any) -> str:
        return obj.username


class _ScopeForm(forms.Form):
    error_css_class = "field-error"

    project = _SlugChoiceField(queryset=NodePool.objects.none(), required=False, empty_label="(all visible)")
    user = _UsernameChoiceField(queryset=NodePool.objects.none(), required=False, empty_label="(everyone)",
                                to_field_name="username")

    def __init__(self, *args: Any, viewer: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.viewer = viewer
        self.choice_field("project").queryset = projects_for(viewer, Action.VIEW).order_by("slug")
        self.choice_field("user").queryset = visible_users(viewer)

    def choice_field(self, name: str) -> forms.ModelChoiceField:
        """A declared model-choice field of this form, typed as one (self.fields holds plain Fields)."""
        return cast(forms.ModelChoiceField, self.fields[name])


class ReportFilterForm(_ScopeForm):
    """A calendar month (the default: this month) or a custom range of days, a grouping and a scope."""

    group = forms.ChoiceField(choices=[(g.value, label) for g, label in (
        (Group.PROJECT, "Project"), (Group.DEPARTMENT, "Department"), (Group.USER, "User"), (Group.POOL, "Node pool"),
        (Group.MONTH, "Month"))], required=False, label="Group by")
    month = forms.CharField(required=False, widget=forms.TextInput(attrs={"type": "month"}),
                            help_text="A calendar month, e.g. 2026-03.")
    start = forms.DateField(required=False, label="Or from", widget=forms.DateInput(attrs={"type": "date"}))
    end = forms.DateField(required=False, label="To (inclusive)", widget=forms.DateInput(attrs={"type": "date"}))
    department = _SlugChoiceField(queryset=NodePool.objects.none(), required=False, empty_label="(all visible)")
    node_pool = _SlugChoiceField(queryset=NodePool.objects.all(), required=False, empty_label="(all pools)",
                                 label="Node pool", to_field_name="slug")
    field_order = ["group", "month", "start", "end", "department", "project", "user", "node_pool"]

    def __init__(self, *args: Any, viewer: Any, **kwargs: Any) -> None:
        super().__init__(*args, viewer=viewer, **kwargs)
        department = self.choice_field("department")
        department.queryset = departments_for(viewer, Action.VIEW).order_by("slug")
        department.to_field_name = "slug"
        self.choice_field("project").to_field_name = "slug"

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
            window = month_window(int(match[1]), int(match[2]))
        else:
            today = timezone.localdate()
            window = month_window(today.year, today.month)
        data["window"] = window
        return data

    def filters(self) -> Filters:
        data = self.cleaned_data
        return Filters(
            department_id=data["department"].pk if data.get("department") else None,
            project_id=data["project"].pk if data.get("project") else None,
            user_id=data["user"].pk if data.get("user") else None,
            node_pool_id=data["node_pool"].pk if data.get("node_pool") else None,
        )


class HolderFilterForm(_ScopeForm):
    """One pool (the first by default), a window of date-times (the last 24 hours by default), project, user, labels."""

    node_pool = _SlugChoiceField(queryset=NodePool.objects.all(), required=False, empty_label=None,
                                 label="Node pool", to_field_name="slug")
    start = forms.DateTimeField(required=False, label="From",
                                widget=forms.DateTimeInput(attrs={"type": "datetime-local"}))
    end = forms.DateTimeField(required=False, label="Until",
                              widget=forms.DateTimeInput(attrs={"type": "datetime-local"}))
    model_label = forms.CharField(required=False, max_length=63, label="Model")
    data_class = forms.CharField(required=False, max_length=63, label="Data class")
    field_order = ["node_pool", "start", "end", "project", "user", "model_label", "data_class"]

    def __init__(self, *args: Any, viewer: Any, **kwargs: Any) -> None:
        super().__init__(*args, viewer=viewer, **kwargs)
        self.choice_field("project").to_field_name = "slug"

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
