"""Filter building blocks every app's FilterSets share: one filter definition serves a page and its API list.

A FilterSet here is bound to a request (its choices are scoped to the requesting user) and filters rows that come
from an access-scoped selector. Pages render its form and paginate `filter_page(...)`; the API lists use it through
`apps.core.api_lists.FilterSetBackend`. Bad input is a form error on the page and a 400 in the API, never a 500.

References to other rows (`?project=7` or `?project=vision`) are checked for shape only while the form validates,
so a filtered list costs no query more than an unfiltered one: the rows are narrowed through a subquery of the
choices the user may see, and only an empty answer asks whether the reference itself names one of those choices
(`check_references`). An id the user may not see and an id that does not exist read the same: "not a valid
choice".
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import date, datetime, time, timedelta
from typing import Any, cast

import django_filters
from django import forms
from django.core.exceptions import ValidationError
from django.core.paginator import Page, Paginator
from django.core.validators import MaxValueValidator, MinValueValidator, ProhibitNullCharactersValidator
from django.db.models import QuerySet
from django.utils import timezone
from django.utils.choices import BaseChoiceIterator
from django.utils.functional import cached_property

from .http import MAX_ID, reference_lookup

SLUG = re.compile(r"^[-a-zA-Z0-9_]+$")
INVALID_CHOICE = "Select a valid choice. That choice is not one of the available choices."
# The first and last days whose bounds stay representable in every timezone (a day's start or end shifted by less
# than a day either way).
FIRST_DAY, LAST_DAY = date.min + timedelta(days=1), date.max - timedelta(days=1)


# --- references to rows the user may see ---------------------------------------------------------------------


class ReferenceField(forms.CharField):
    """An id (ASCII digits, a database id) or, when `slug_field` is set, a slug; checked for shape only.

    `queryset` holds the choices (scoped to the user); a select lists them lazily, so validating costs no query.
    """

    default_error_messages = {"invalid_choice": INVALID_CHOICE}

    def __init__(self, *, queryset: QuerySet, slug_field: str | None, select: bool, **kwargs: Any) -> None:
        kwargs.setdefault("max_length", 100)
        kwargs.setdefault("widget", forms.Select(choices=QuerySetChoices(queryset)) if select else forms.TextInput(
            attrs={"placeholder": "id or slug" if slug_field else "id"}))
        super().__init__(**kwargs)
        self.queryset = queryset
        self.slug_field = slug_field

    def widget_attrs(self, widget: forms.Widget) -> dict[str, Any]:
        attrs = super().widget_attrs(widget)
        if isinstance(widget, forms.Select):
            attrs.pop("maxlength", None)
        return attrs

    def to_python(self, value: Any) -> str:
        text = super().to_python(value)
        if not text:
            return ""
        lookup = reference_lookup(text, name_field=self.slug_field)
        if lookup is None or ("pk" not in lookup and not SLUG.match(text)):
            raise ValidationError(self.error_messages["invalid_choice"], code="invalid_choice")
        return text


class QuerySetChoices(BaseChoiceIterator):
    """A select's options: "(any)", then the rows of `queryset`, read only when the select is rendered."""

    def __init__(self, queryset: QuerySet) -> None:
        self.queryset = queryset

    def __iter__(self) -> Iterator[tuple[str, str]]:
        yield "", "(any)"
        for row in self.queryset:
            yield str(row.pk), str(row)


class ReferenceFilter(django_filters.CharFilter):
    """Rows whose `field_name` points at one of `choices(request)` named by id (or slug).

    `choices` is an access-scoped selector (e.g. `lambda request: projects_for(request.user)`): a user never sees
    choices for rows they cannot see, and the rows are narrowed through a subquery of those choices, so a reference
    never widens what the FilterSet's queryset already allows.
    """

    field_class = ReferenceField

    def __init__(self, *args: Any, choices: Callable[[Any], QuerySet], slug_field: str | None = "slug",
                 select: bool = True, **kwargs: Any) -> None:
        self.choices = choices
        self.slug_field = slug_field
        self.select = select
        super().__init__(*args, **kwargs)

    def scoped(self) -> QuerySet:
        return self.choices(self.parent.request)

    @property
    def field(self) -> forms.Field:
        if not hasattr(self, "_field"):
            self._field = ReferenceField(queryset=self.scoped(), slug_field=self.slug_field, select=self.select,
                                         label=self.label, **self.extra)
        return self._field

    def matching(self, value: str) -> QuerySet:
        """The choices `value` names: by id, else by slug (the field lets a slug through only with a slug_field)."""
        return self.scoped().filter(**(reference_lookup(value, name_field=self.slug_field) or {"pk__in": []}))

    def filter(self, qs: QuerySet, value: str) -> QuerySet:
        if not value:
            return qs
        return qs.filter(**{f"{self.field_name}__in": self.matching(value).values("pk")})

    def names_a_choice(self, value: str) -> bool:
        return self.matching(value).exists()


# --- plain values ---------------------------------------------------------------------------------------------


class IdOrNameField(forms.CharField):
    """An id (ASCII digits, a database id) or a name; anything with digits only must be a valid id."""

    def to_python(self, value: Any) -> str:
        text = super().to_python(value) or ""
        if text.isascii() and text.isdigit() and reference_lookup(text, name_field=None) is None:
            raise ValidationError(f"An id is a whole number from 1 to {MAX_ID}.", code="invalid_id")
        return text


class IdOrNameFilter(django_filters.CharFilter):
    """A related row by id or by a name field (`?owner=7` or `?owner=alice`). Not a scoped choice: the rows are
    already scoped, so a name the user cannot see simply matches nothing, as does one that does not exist."""

    field_class = IdOrNameField

    def __init__(self, *args: Any, name_field: str, **kwargs: Any) -> None:
        self.name_field = name_field
        kwargs.setdefault("max_length", 150)
        super().__init__(*args, **kwargs)

    def filter(self, qs: QuerySet, value: str) -> QuerySet:
        if not value:
            return qs
        lookup = reference_lookup(value, name_field=self.name_field) or {"pk__in": []}
        return qs.filter(**{f"{self.field_name}__{key}": wanted for key, wanted in lookup.items()})


class ChoiceListFilter(django_filters.BaseInFilter, django_filters.ChoiceFilter):
    """One choice or several, comma-separated (`?status=queued,running`); a page offers one of them in a select.
    `aliases` are choices that stand for several values (`live`: every status before a final one)."""

    def __init__(self, *args: Any, choices: Sequence[tuple[str, str]], noun: str,
                 aliases: dict[str, Iterable[str]] | None = None, **kwargs: Any) -> None:
        self.aliases = {key: sorted(values) for key, values in (aliases or {}).items()}
        allowed = ", ".join(value for value, _ in choices)
        kwargs.setdefault("empty_label", "(any)")
        kwargs.setdefault("error_messages", {"invalid_choice": f"Unknown {noun} %(value)s; choose from {allowed}."})
        kwargs.setdefault("help_text", f"One or several, comma-separated: {allowed}.")
        super().__init__(*args, choices=choices, **kwargs)

    def filter(self, qs: QuerySet, value: list[str] | None) -> QuerySet:
        wanted: set[str] = set()
        for choice in value or ():
            wanted |= set(self.aliases.get(choice, [choice] if choice else []))
        if not wanted:
            return qs
        return qs.filter(**{f"{self.field_name}__in": sorted(wanted)})


class DayFilter(django_filters.DateFilter):
    """A day in the current timezone: `since` counts from its start, `until` through its end (both inclusive)."""

    def __init__(self, *args: Any, bound: str, **kwargs: Any) -> None:
        if bound not in ("since", "until"):
            raise ValueError(f"bound is since or until, not {bound!r}")
        self.bound = bound
        kwargs.setdefault("widget", forms.DateInput(attrs={"type": "date"}))
        kwargs.setdefault("validators", [
            MinValueValidator(FIRST_DAY, f"Pick a day from {FIRST_DAY.isoformat()} on."),
            MaxValueValidator(LAST_DAY, f"Pick a day up to {LAST_DAY.isoformat()}."),
        ])
        kwargs.setdefault("error_messages", {"invalid": "Use a date such as 2026-01-31."})
        super().__init__(*args, **kwargs)

    def filter(self, qs: QuerySet, value: date | None) -> QuerySet:
        if value is None:
            return qs
        start = datetime.combine(value, time.min, tzinfo=timezone.get_current_timezone())
        if self.bound == "since":
            return qs.filter(**{f"{self.field_name}__gte": start})
        return qs.filter(**{f"{self.field_name}__lt": start + timedelta(days=1)})


class StableOrderingFilter(django_filters.OrderingFilter):
    """`?ordering=name,-created_at` over an explicit whitelist; `default` orders when none is asked for and breaks
    ties after the asked order, so pages never shuffle rows between requests."""

    def __init__(self, *args: Any, fields: Sequence[tuple[str, str]], default: Sequence[str], **kwargs: Any) -> None:
        self.default = tuple(default)
        kwargs.setdefault("empty_label", "(default)")
        kwargs.setdefault("help_text", "Comma-separated; a leading '-' sorts descending.")
        super().__init__(*args, fields=fields, **kwargs)

    def filter(self, qs: QuerySet, value: list[str] | None) -> QuerySet:
        asked = [self.get_ordering_value(param) for param in value or () if param]
        return qs.order_by(*asked, *self.default)


# --- the FilterSet and the page's use of it -------------------------------------------------------------------


class FilterForm(forms.Form):
    """The form of every FilterSet: a NUL character in any value is refused with one clear message (choices,
    dates and orderings would otherwise echo it back in theirs)."""

    def clean(self) -> dict[str, Any]:
        data = super().clean() or self.cleaned_data
        check = ProhibitNullCharactersValidator()
        for name in self.fields:
            raw = self.data.get(self.add_prefix(name))
            if isinstance(raw, str) and "\x00" in raw:
                self.errors.pop(name, None)
                self.add_error(name, ValidationError(check.message, code=check.code))
        return data


class ScopedFilterSet(django_filters.FilterSet):
    """A FilterSet over rows an access-scoped selector returned, with choices scoped to `request.user`."""

    class Meta:
        form = FilterForm

    def __init__(self, data: Any = None, queryset: QuerySet | None = None, *, request: Any, **kwargs: Any) -> None:
        if queryset is None:
            raise TypeError("Pass the rows from an access-scoped selector.")
        super().__init__(data, queryset, request=request, **kwargs)

    def rows(self) -> QuerySet:
        """The filtered rows, or none while the form has errors."""
        return self.qs if self.is_valid() else self.queryset.none()

    def valid_unpaginated(self) -> bool:
        """For an answer that is not a page (a CSV export): the form is valid and, when no row matched, every
        reference names one of its choices (one query more than the export's, two when nothing matched)."""
        return self.is_valid() and (self.qs.exists() or self.check_references())

    def check_references(self) -> bool:
        """After an empty answer: each reference that names none of its choices becomes an error on its field.
        Returns whether the form is still free of errors. One query per reference given, none otherwise."""
        if self.form.errors:
            return False
        for name, filter_ in self.filters.items():
            value = self.form.cleaned_data.get(name)
            if isinstance(filter_, ReferenceFilter) and value and not filter_.names_a_choice(value):
                self.form.add_error(name, ValidationError(INVALID_CHOICE, code="invalid_choice"))
        return not self.form.errors


# A page's pager counts at most this many rows: counting every row of a large list costs more than showing a page of
# it (docs/architecture.md, Serving the portal). The API's lists keep their exact count.
PAGER_COUNT_CAP = 10_000


class CappedPaginator(Paginator):
    """A Paginator that counts up to `cap` rows (`COUNT(*)` over `LIMIT cap + 1`); past it the pager says "more than"
    and the pages stop at the cap, where narrower filters take over."""

    def __init__(self, object_list: Any, per_page: int, *, cap: int = PAGER_COUNT_CAP) -> None:
        super().__init__(object_list, per_page)
        self.cap = cap

    @cached_property
    def counted(self) -> int:
        """Only which rows, not their order, columns or joined rows: PostgreSQL counts the first `cap + 1` it finds
        (from an index alone when nothing is filtered) instead of sorting and joining them (30 ms down to 1-5 ms at
        100,000 workloads, bench/README.md)."""
        return cast(QuerySet, self.object_list).order_by().values("pk")[: self.cap + 1].count()

    @cached_property
    def count(self) -> int:
        return min(self.counted, self.cap)

    @property
    def capped(self) -> bool:
        """Whether rows beyond the cap exist and no page shows them."""
        return self.counted > self.cap


def filter_page(filterset: ScopedFilterSet, *, per_page: int, number: Any) -> Page:
    """The page of rows a page view shows: CappedPaginator.get_page over the FilterSet's rows (an unusable page
    number reads as the nearest page, as before), with references checked when nothing matched."""
    page = CappedPaginator(filterset.rows(), per_page, cap=PAGER_COUNT_CAP).get_page(number)
    if not page.paginator.count:
        filterset.check_references()
    return page
