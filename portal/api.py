"""API plumbing shared by every app: service errors become DRF responses with the same messages as the forms."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import exceptions
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler


def validation_error_detail(error: DjangoValidationError) -> Any:
    if hasattr(error, "error_dict"):
        return {
            ("non_field_errors" if field == "__all__" else field): [str(m) for e in errors for m in e.messages]
            for field, errors in error.error_dict.items()
        }
    return {"non_field_errors": list(error.messages)}


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, DjangoValidationError):
        exc = exceptions.ValidationError(validation_error_detail(exc))
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied(str(exc) or None)
    return drf_exception_handler(exc, context)
