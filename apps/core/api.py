"""API plumbing shared by every app: service errors become DRF responses with the same messages as the forms."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import models
from django.db.models import QuerySet
from django.http import QueryDict
from django.utils.http import parse_etags
from drf_spectacular.contrib.django_filters import DjangoFilterExtension
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import exceptions, permissions, serializers, status, viewsets
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from .actors import Actor, Visitor
from .http import holds_nul, parse_id, parse_int
from .services import StaleWrite


class AuthenticatedAPIRequest(Request):
    """For annotations only: the request of an API view behind IsAuthenticated (the default permission), whose
    `request.user` is a signed-in Actor. A view declares it as the type of `self.request`, and of the `request` its
    own actions take. (drf-spectacular builds the schema with an anonymous request: a `get_queryset` returns
    nothing for `swagger_fake_view` before it reads the user.)"""

    user: Actor


def validation_error_detail(error: DjangoValidationError) -> Any:
    if hasattr(error, "error_dict"):
        return {
            ("non_field_errors" if field == "__all__" else field): [str(m) for e in errors for m in e.messages]
            for field, errors in error.error_dict.items()
        }
    return {"non_field_errors": list(error.messages)}


class PreconditionFailed(exceptions.APIException):
    status_code = status.HTTP_412_PRECONDITION_FAILED
    default_detail = "The row changed since the version you read; nothing was saved."
    default_code = "stale"


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """Service errors in the API's error shape (apps/core/api_schema.py), always as JSON: the browsable API's HTML is
    for reading rows, an error is answered to scripts and browsers alike in one shape."""
    request = context.get("request")
    if request is not None:
        request.accepted_renderer, request.accepted_media_type = JSONRenderer(), JSONRenderer.media_type
    return _error_response(exc, context)


def _error_response(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, StaleWrite):
        response = drf_exception_handler(PreconditionFailed(exc.messages[0]), context)
        if response is not None:
            response.data["current_version"] = exc.current_version
            response["ETag"] = version_etag(exc.current_version)
        return response
    if isinstance(exc, DjangoValidationError):
        exc = exceptions.ValidationError(validation_error_detail(exc))
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied(str(exc) or None)
    return drf_exception_handler(exc, context)


NUL_MESSAGE = "Null characters are not allowed."


def nul_errors(data: Any, fields: Mapping[str, serializers.Field]) -> dict[str, list[str]]:
    """The references (related fields) of a request body whose value holds a NUL: DRF would look the row up with
    it and PostgreSQL refuses NUL in a query (a 500). Text fields refuse NUL themselves."""
    if isinstance(data, QueryDict):  # a form post: every value of each key
        return {name: [NUL_MESSAGE] for name, values in data.lists()
                if isinstance(fields.get(name), serializers.RelatedField) and any(map(holds_nul, values))}
    if not isinstance(data, Mapping):
        return {}
    return {name: [NUL_MESSAGE] for name, value in data.items()
            if isinstance(fields.get(name), serializers.RelatedField) and holds_nul(value)}


INTEGER_TEXT = re.compile(r"^\s*[+-]?[0-9]+\s*$")


class AsciiIntegerField(serializers.IntegerField):
    """An integer written as one: ASCII digits only (DRF's int() would read '\u0661' as 1), and no fraction, not even
    a zero one (DRF reads 1.0 and "1.0" as 1; a JSON number with a point is a float to most clients)."""

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, float | Decimal) or (isinstance(data, str) and not INTEGER_TEXT.match(data)):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictCharField(serializers.CharField):
    """Text that must arrive as text: DRF's CharField saves a JSON number as its digits (a name of 5, of 2**63)."""

    default_error_messages = {"invalid": "Not a valid string."}

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class AsciiDecimalField(serializers.DecimalField):
    """A decimal whose text form has ASCII digits only (Decimal() reads Unicode digits too)."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, str) and not data.isascii():
            self.fail("invalid")
        return super().to_internal_value(data)


class ShapeOnlyModelSerializer(serializers.ModelSerializer):
    """A ModelSerializer that checks shape only (types, lengths, choices, required/nullable).

    A field the body names but the serializer does not write is refused by name (400).
    The model's validators, bounds and uniqueness checks are dropped here on purpose: the services run them
    (full_clean plus the rules that span rows) and their messages reach the client through the exception handler
    above, so the API and the forms say the same thing.
    """

    serializer_field_mapping = {
        **serializers.ModelSerializer.serializer_field_mapping,
        **dict.fromkeys((models.IntegerField, models.SmallIntegerField, models.BigIntegerField,
                         models.PositiveIntegerField, models.PositiveSmallIntegerField,
                         models.PositiveBigIntegerField), AsciiIntegerField),
        models.DecimalField: AsciiDecimalField,
        models.CharField: StrictCharField,
        models.TextField: StrictCharField,
    }

    def build_standard_field(self, field_name: str, model_field: Any) -> tuple[type, dict[str, Any]]:
        field_class, kwargs = super().build_standard_field(field_name, model_field)
        for rule in ("validators", "min_value", "max_value"):
            kwargs.pop(rule, None)
        return field_class, kwargs

    def get_validators(self) -> list:
        return []

    def to_internal_value(self, data: Any) -> Any:
        """A field the body names that this serializer would not write (read-only or unknown) is refused by name,
        not silently dropped: the client believes it changed something. Form posts (the browsable API) carry
        extra keys such as the CSRF token and are not checked."""
        if isinstance(data, Mapping) and not isinstance(data, QueryDict):
            errors = {}
            for name in sorted(set(data) - {n for n, f in self.fields.items() if not f.read_only}):
                errors[name] = ["This field is read-only." if name in self.fields else "Unknown field."]
            if errors := errors or nul_errors(data, self.fields):
                raise serializers.ValidationError(errors)
        elif errors := nul_errors(data, self.fields):  # a form post names references by text too
            raise serializers.ValidationError(errors)
        return super().to_internal_value(data)


class ScopedPrimaryKeyRelatedField(serializers.PrimaryKeyRelatedField):
    """A reference by id to a row the requesting user may see; other ids read as "does not exist".

    `scope(user)` comes from the access module (departments_for, projects_for, ...); `queryset` names the model
    for the schema only.
    """

    def __init__(self, *, scope: Callable[[Visitor | None], QuerySet], **kwargs: Any) -> None:
        self.scope = scope
        super().__init__(**kwargs)

    def get_queryset(self) -> QuerySet:
        request = self.context.get("request")
        return self.scope(getattr(request, "user", None))

    def to_internal_value(self, data: Any) -> Any:
        """An id is a JSON integer or ASCII digits: Django's int() would read '\u0661' (Arabic-Indic one) and 1.5
        as row 1, and True as 1."""
        if isinstance(data, bool) or not isinstance(data, int | str):
            self.fail("incorrect_type", data_type=type(data).__name__)
        if parse_id(data) is None:
            self.fail("does_not_exist", pk_value=data)
        return super().to_internal_value(data)


class StrictIdLookupMixin:
    """Detail URLs name a row by its id in ASCII digits; anything else is a 404 in the API's shape. The router lets
    any text through, and int() would read U+0661 (Arabic-Indic one) as row 1."""

    lookup_field = "pk"

    def get_object(self) -> Any:
        if self.lookup_field == "pk" and parse_id(self.kwargs.get(self.lookup_field)) is None:  # type: ignore[attr-defined]
            raise exceptions.NotFound()
        return super().get_object()  # type: ignore[misc]




def version_etag(version: int, nested: str = "") -> str:
    """The ETag of a versioned row: weak, `W/"<version>"`; a row read with versioned rows nested in it (a project's
    quotas) adds their digest, `W/"<version>.<digest>"`, so a conditional read (If-None-Match) sees them change.
    If-Match reads the version before the dot: a PATCH is conditional on the row's own fields."""
    return f'W/"{version}.{nested}"' if nested else f'W/"{version}"'


def nested_versions_digest(data: Mapping[str, Any]) -> str:
    """A digest of the (id, version) of the versioned rows listed in a row's representation; "" when there are none."""
    nested = [(name, item.get("id"), item["version"]) for name, value in sorted(data.items())
              if isinstance(value, list) for item in value if isinstance(item, Mapping) and "version" in item]
    if not nested:
        return ""
    return hashlib.sha256(json.dumps(nested, default=str).encode()).hexdigest()[:12]


def if_match_versions(request: Request) -> frozenset[int] | None:
    """The versions the entity tags of an `If-Match` header name (`W/"3"`, `"3"`, `W/"3.<digest>"`), None without
    the header or for `*`. A well-formed tag that names no version (a list's `W/"c-<digest>"`, `"abc"`) is a
    condition no row meets: the empty set, answered 412 as RFC 9110 section 13.1.1 says. A header that is no entity
    tag list at all is a 400, since a condition the portal cannot read must not turn into an unconditional write."""
    header = request.headers.get("If-Match")
    if header is None or header.strip() == "*":
        return None
    tags = parse_etags(header)
    if len(tags) != len(header.split(",")):  # Django's parse_etags drops what is not an entity tag
        raise exceptions.ValidationError({"If-Match": [
            'Send the ETag as read from this row, e.g. If-Match: W/"3" (quoted), or leave the header out.']})
    versions = (parse_int(tag.removeprefix("W/").strip('"').split(".")[0]) for tag in tags)
    return frozenset(version for version in versions if version)


def expected_version(request: Request, body_version: int | None, current_version: int) -> int | None:
    """The version a PATCH was based on, from `If-Match` or the body's `version`; None when it names none (the write
    is then unconditional). Of several tags the one naming the row's `current_version` counts (the service checks it
    again on the locked row); tags that name no version of it answer 412. A body `version` that none of the tags
    names is a 400."""
    header = if_match_versions(request)
    if header is None:
        return body_version
    if body_version is not None and header and body_version not in header:
        raise exceptions.ValidationError({"version": [
            f"The body says version {body_version} but If-Match says {', '.join(map(str, sorted(header)))}; send "
            "one of them."]})
    if not header:
        raise StaleWrite("If-Match names no version of this row (a list's ETag, or another resource's): nothing was "
                         "saved. Read the row and send its ETag.", current_version=current_version)
    return current_version if current_version in header else max(header)


class VersionField(serializers.IntegerField):
    """A row's `version`: read with the row; sent back on PATCH it makes the change conditional (as If-Match)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("min_value", 1)
        kwargs.setdefault("required", False)
        kwargs.setdefault("help_text", "Bumped by every change. Send the version you read with a PATCH (or its "
                                       "ETag as If-Match): a stale one is refused with 412 and nothing changes.")
        super().__init__(**kwargs)


IF_MATCH = OpenApiParameter(
    "If-Match", OpenApiTypes.STR, OpenApiParameter.HEADER, required=False,
    description='The ETag of the row as you read it (e.g. W/"3"): a row changed since is not changed and answers 412 '
                "with what changed. Without it (or a `version` in the body) the change is unconditional.")


class VersionETagMixin:
    """A versioned row read or written alone answers its ETag (If-Match takes it back)."""

    def finalize_response(self, request: Request, response: Response, *args: Any, **kwargs: Any) -> Response:
        response = super().finalize_response(request, response, *args, **kwargs)  # type: ignore[misc]
        if response.status_code < 300 and isinstance(response.data, dict) and isinstance(
                response.data.get("version"), int):
            response["ETag"] = version_etag(response.data["version"], nested_versions_digest(response.data))
        return response


IF_MATCH_DELETE = OpenApiParameter(
    "If-Match", OpenApiTypes.STR, OpenApiParameter.HEADER, required=False,
    description='The ETag of the row as you read it (e.g. W/"3"): a row changed since is not deleted and answers 412 '
                "with what changed. Without it the delete is unconditional.")


@extend_schema_view(partial_update=extend_schema(parameters=[IF_MATCH]),
                    destroy=extend_schema(parameters=[IF_MATCH_DELETE]))
class ServiceViewSet(VersionETagMixin, StrictIdLookupMixin, viewsets.ModelViewSet):
    """CRUD whose writes go through services. Reads come from access-scoped querysets (unseen rows: 404).

    Before validating a write, `may_create()` / `may_change(obj)` (answered by the access module) turn away users
    who may not write at all with 403; the services check again, and decide finer questions themselves.
    PUT is not offered: PATCH changes the fields it names.
    """

    request: AuthenticatedAPIRequest
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]
    denied_message = "You may not make this change."

    def may_create(self) -> bool:
        return True

    def may_change(self, obj: Any) -> bool:
        return True

    def check_permissions(self, request: Any) -> None:
        super().check_permissions(request)
        # Also asked by OPTIONS (DRF's metadata), which then offers the POST form only to those who may create.
        if request.method == "POST" and not self.detail and not self.may_create():
            self.permission_denied(request, message=self.denied_message)

    def check_object_permissions(self, request: Any, obj: Any) -> None:
        super().check_object_permissions(request, obj)
        if request.method not in permissions.SAFE_METHODS and not self.may_change(obj):
            self.permission_denied(request, message=self.denied_message)

    def expected_version(self, serializer: Any) -> int | None:
        """For perform_update: the version the PATCH was based on (taken out of the validated data)."""
        return expected_version(self.request, serializer.validated_data.pop("version", None),
                                serializer.instance.version)

    def destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """DELETE, conditional on `If-Match` as PATCH is: perform_destroy passes `self.delete_version` (None: none
        named, or a row without versions) to the service, which checks it on the locked row."""
        instance = self.get_object()
        current = getattr(instance, "version", None)
        self.delete_version = None if current is None else expected_version(request, None, current)
        self.perform_destroy(instance)
        return Response(status=status.HTTP_204_NO_CONTENT)

    delete_version: int | None = None

    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        if isinstance(request.data, dict) and "version" in request.data:
            raise exceptions.ValidationError({"version": ["A new row starts at version 1; leave version out."]})
        return super().create(request, *args, **kwargs)



class FilterSetSchema(DjangoFilterExtension):
    """The lists' filters as django-filter's schema extension documents them, with what FilterSetBackend enforces
    beyond it: a list filter (`?status=queued,running`) has at least one item (an empty one is refused)."""

    target_class = "apps.core.api_lists.FilterSetBackend"
    priority = 1

    def resolve_filter_field(self, auto_schema: Any, model: Any, filterset_class: Any, field_name: str,
                             filter_field: Any) -> list[dict[str, Any]]:
        parameters: list[dict[str, Any]] = super().resolve_filter_field(
            auto_schema, model, filterset_class, field_name, filter_field)
        for parameter in parameters:
            if parameter["schema"].get("type") == "array":
                parameter["schema"]["minItems"] = 1
        return parameters
