"""The API lists' filter backend and pagination (DEFAULT_FILTER_BACKENDS, DEFAULT_PAGINATION_CLASS), and the
JSON parser of every request body (DEFAULT_PARSER_CLASSES).

Kept apart from `api.py`, which imports DRF's viewsets: DRF reads these settings while importing its generics, so
this module must not import them. Filters come from the apps' FilterSets (apps/core/filters.py); bad query
parameters answer 400 in the API's error shape (a field name and its messages).
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Mapping
from typing import Any

from django import forms
from django.conf import settings
from django.db.models import QuerySet
from django_filters.fields import BaseCSVField
from django_filters.rest_framework import DjangoFilterBackend
from rest_framework import exceptions, pagination, parsers
from rest_framework.request import Request

from .filters import ScopedFilterSet
from .http import MAX_ID, parse_int

YES_NO = {"true", "false", "1", "0"}


def form_error_detail(errors: Any) -> dict[str, list[str]]:
    """A form's errors in the API's error shape (the same as `validation_error_detail`)."""
    return {("non_field_errors" if field == "__all__" else field): [str(message) for message in messages]
            for field, messages in errors.items()}


class FilterSetBackend(DjangoFilterBackend):
    """The list's `filterset_class`, bound to the request: invalid filters answer 400 in the API's error shape.

    Only lists are filtered (a detail, a change or a delete ignores the query string). The FilterSet is kept on the
    view as `view.filterset` for `Pagination`, which checks its references when nothing matched.
    """

    def filter_queryset(self, request: Request, queryset: QuerySet, view: Any) -> QuerySet:
        if getattr(view, "action", None) != "list":
            return queryset
        filterset = self.get_filterset(request, queryset, view)
        if filterset is None:
            return queryset
        unreadable = _unreadable_values(filterset, request)
        if unreadable:
            raise exceptions.ValidationError(unreadable)
        if not filterset.is_valid():
            raise exceptions.ValidationError(form_error_detail(filterset.errors))
        view.filterset = filterset
        return filterset.qs


def _unreadable_values(filterset: Any, request: Request) -> dict[str, list[str]]:
    """What the API refuses though a page's form would let it by: an empty value of a typed filter (a choice, a
    date, a number, a yes/no; free text may be empty) and a yes/no other than true or false. A page's "(any)" sends
    `?status=`, which its form reads as no filter; in the API, whose schema types every filter, a filter not wanted
    is left out, and a typo must not quietly widen the list."""
    errors: dict[str, list[str]] = {}
    for name, field in filterset.form.fields.items():
        raw = request.query_params.get(name)
        if raw is None or (isinstance(field, forms.CharField) and not isinstance(field, BaseCSVField)):
            continue
        if isinstance(field, forms.NullBooleanField):
            if raw.lower() not in YES_NO:
                errors[name] = ["Use true or false, or leave the parameter out."]
        elif "" in (raw.split(",") if isinstance(field, BaseCSVField) else [raw]):
            errors[name] = ["Give a value (or several, comma-separated, where the list allows it), or leave the "
                            "parameter out."]
    return errors


class Pagination(pagination.LimitOffsetPagination):
    """Limit/offset pages with strict parameters (a bad `limit` or `offset` is a 400, not silently the default;
    a page holds at most `max_limit` rows).

    When a filtered list comes back empty, a reference in the filter that names no row the user may see (an unseen
    or unknown project, say) turns the answer into a 400 (see `ScopedFilterSet.check_references`).
    """

    max_limit = 1000

    def get_limit(self, request: Request) -> int | None:
        raw = request.query_params.get(self.limit_query_param)
        return self.default_limit if raw is None else self._number(self.limit_query_param, raw, lowest=1,
                                                                  highest=self.max_limit)

    def get_offset(self, request: Request) -> int:
        raw = request.query_params.get(self.offset_query_param)
        return 0 if raw is None else self._number(self.offset_query_param, raw, lowest=0, highest=MAX_ID)

    @staticmethod
    def _number(name: str, raw: str, *, lowest: int, highest: int) -> int:
        number = parse_int(raw)
        if number is None or not lowest <= number <= highest:
            raise exceptions.ValidationError({name: [f"Use a whole number from {lowest} to {highest}."]})
        return number

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        """`limit` and `offset` with the bounds `get_limit` and `get_offset` enforce, so the schema says them."""
        bounds = {self.limit_query_param: (1, self.max_limit, f"Rows per page, 1 to {self.max_limit} (default "
                                                              f"{self.default_limit})."),
                  self.offset_query_param: (0, MAX_ID, "Rows to skip before the page, from 0.")}
        parameters: list[dict[str, Any]] = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            lowest, highest, description = bounds[parameter["name"]]
            parameter["schema"] = {**parameter["schema"], "minimum": lowest, "maximum": highest}
            parameter["description"] = description
        return parameters

    def paginate_queryset(self, queryset: Any, request: Request, view: Any = None) -> list | None:
        page: list | None = super().paginate_queryset(queryset, request, view)
        filterset = getattr(view, "filterset", None)
        if not self.count and isinstance(filterset, ScopedFilterSet) and not filterset.check_references():
            raise exceptions.ValidationError(form_error_detail(filterset.errors))
        return page


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [key for key, _ in pairs]
    if len(set(keys)) != len(keys):
        twice = sorted({key for key in keys if keys.count(key) > 1})
        raise ValueError(f"a key appears twice in one object: {', '.join(twice)}")
    return dict(pairs)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


class StrictJSONParser(parsers.JSONParser):
    """DRF's JSON parser, stricter: nesting too deep for the parser (RecursionError, which DRF lets through as a
    500), a key given twice in one object (which would silently keep the last) and NaN/Infinity answer 400.
    A NUL is refused per field by the serializers (apps.core.api.nul_errors)."""

    def parse(self, stream: Any, media_type: str | None = None,
              parser_context: Mapping[str, Any] | None = None) -> Any:
        encoding = (parser_context or {}).get("encoding", settings.DEFAULT_CHARSET)
        try:
            data = json.load(codecs.getreader(encoding)(stream), object_pairs_hook=_unique_keys,
                             parse_constant=_no_constant)
        except RecursionError as exc:
            raise exceptions.ParseError("JSON parse error - the body is nested too deeply.") from exc
        except ValueError as exc:
            raise exceptions.ParseError(f"JSON parse error - {exc}") from exc
        return data


class StrictMultiPartParser(parsers.MultiPartParser):
    """DRF's multipart parser, stricter: a body that is not empty but holds no named part (a part without its
    Content-Disposition name, which Django skips silently) is a 400, not an empty change that succeeds."""

    def parse(self, stream: Any, media_type: str | None = None,
              parser_context: Mapping[str, Any] | None = None) -> Any:
        parsed = super().parse(stream, media_type, parser_context)
        request = (parser_context or {}).get("request")
        sent = parse_int(str(getattr(request, "META", {}).get("CONTENT_LENGTH") or "0")) or 0
        if sent and not parsed.data and not parsed.files:
            raise exceptions.ParseError("Multipart form parse error - the body holds no named form field.")
        return parsed
