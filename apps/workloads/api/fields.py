"""The workloads API's own field types: project references, env, CPU and memory quantities, the audit labels.

Each parses one value strictly (ASCII digits, Kubernetes quantity suffixes) and leaves the rules to the services.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from decimal import ROUND_CEILING, Decimal, InvalidOperation
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.fields import empty

from apps.core.api import AsciiIntegerField, StrictCharField
from apps.core.http import holds_nul, reference_lookup
from apps.org.models import Project
from apps.org.selectors import projects_for

# A Kubernetes quantity: a signed decimal with an optional binary (Ki..Ei) or decimal (m, k..E) suffix.
QUANTITY = re.compile(  # ASCII digits only: Decimal() would read Unicode ones too
    r"^\s*(?P<number>[+-]?(?:\d+(?:\.\d*)?|\.\d+))\s*(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E)?\s*$", re.ASCII
)
_SUFFIX_BYTES = {
    "Ki": Decimal(2) ** 10, "Mi": Decimal(2) ** 20, "Gi": Decimal(2) ** 30, "Ti": Decimal(2) ** 40,
    "Pi": Decimal(2) ** 50, "Ei": Decimal(2) ** 60,
    "m": Decimal("0.001"), "k": Decimal(10) ** 3, "M": Decimal(10) ** 6, "G": Decimal(10) ** 9, "T": Decimal(10) ** 12,
    "P": Decimal(10) ** 15, "E": Decimal(10) ** 18,
}
_GIB = Decimal(2) ** 30
_HUNDREDTH = Decimal("0.01")


def _number(value: Any) -> Decimal | None:
    """A JSON number or a numeric string as a Decimal; None for anything else (booleans included)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float | Decimal):
        try:
            return Decimal(str(value))
        except InvalidOperation:
            return None
    return None


@extend_schema_field({
    "oneOf": [{"type": "integer"}, {"type": "string"}],
    "description": "Project id or slug.",
    "example": "vision",
})
class ProjectReferenceField(serializers.Field):
    """A project by id or slug, among those the requesting user may see; any other reads as "does not exist"."""

    default_error_messages = {"does_not_exist": 'Project "{value}" does not exist.',
                              "invalid": "Give a project id or slug."}

    def to_internal_value(self, data: Any) -> Project:
        if isinstance(data, bool) or not isinstance(data, int | str) or data == "":
            self.fail("invalid")
        text = str(data).strip()
        # The submit view asks about the project before the whole body is validated (403 before 400): one read for
        # both. The field is the serializer's own copy, so what it remembers lasts one request.
        found: dict[str, Project | None] = self.__dict__.setdefault("_found", {})
        if text not in found:
            request = self.context.get("request")
            lookup = reference_lookup(text, name_field="slug")
            found[text] = projects_for(getattr(request, "user", None)).select_related(
                "department", "default_priority_class").filter(**lookup).first() if lookup is not None else None
        project = found[text]
        if project is None:
            self.fail("does_not_exist", value=text)
        return project

    def to_representation(self, value: Project) -> int:
        return value.pk


@extend_schema_field({
    "oneOf": [
        {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"},
                                                                     "value": {"type": "string"}},
                                    "required": ["name", "value"]}},
        {"type": "object", "additionalProperties": {"type": "string"}},
    ],
    "description": 'Environment variables: [{"name": "EPOCHS", "value": "10"}] or {"EPOCHS": "10"}.',
})
class EnvField(serializers.Field):
    """Environment variables as a list of {name, value} or an object {NAME: value}; stored as the list."""

    default_error_messages = {
        "invalid": 'Give a list of {{"name": ..., "value": ...}} objects or an object {{NAME: value}}.',
    }

    def to_internal_value(self, data: Any) -> list[dict[str, str]]:
        if isinstance(data, Mapping):
            pairs = list(data.items())
        elif isinstance(data, list):
            if not all(isinstance(item, Mapping) and set(item) == {"name", "value"} for item in data):
                self.fail("invalid")
            pairs = [(item["name"], item["value"]) for item in data]
        else:
            self.fail("invalid")
        if not all(isinstance(name, str) for name, _ in pairs):
            self.fail("invalid")
        # Values are strings, as in Kubernetes: a number read as text could change form (1e3, 0.10), so it is
        # refused with the quoted value to send.
        if errors := [f'The value of {name} must be a string: quote it, e.g. "{json.dumps(value)}".'
                      if isinstance(value, int | float | bool) else f"The value of {name} must be a string."
                      for name, value in pairs if not isinstance(value, str)]:
            raise serializers.ValidationError(errors)
        return [{"name": name, "value": value} for name, value in pairs]

    def to_representation(self, value: list[dict[str, str]]) -> list[dict[str, str]]:
        return value


@extend_schema_field({
    "oneOf": [{"type": "number"}, {"type": "string"}],
    "description": 'CPU cores per pod: a number or a Kubernetes quantity such as "500m".',
    "example": "4",
})
class CpuField(serializers.Field):
    default_error_messages = {"invalid": 'Give CPU cores as a number or a Kubernetes quantity such as "500m".'}

    def to_internal_value(self, data: Any) -> Decimal:
        number = _number(data)
        if number is not None:
            return number
        match = QUANTITY.match(data) if isinstance(data, str) else None
        if match is None or match["suffix"] not in (None, "m"):
            self.fail("invalid")
        cores = Decimal(match["number"])
        return cores * _SUFFIX_BYTES["m"] if match["suffix"] == "m" else cores

    def to_representation(self, value: Decimal) -> str:
        return str(value)


@extend_schema_field({
    "oneOf": [{"type": "number"}, {"type": "string"}],
    "description": ('Memory per pod: a Kubernetes quantity such as "16Gi" or "512Mi", or a plain number of GiB. '
                    "Stored in GiB, rounded up to 0.01 GiB."),
    "example": "16Gi",
})
class MemoryField(serializers.Field):
    """Memory per pod as GiB. A plain number (JSON or string) means GiB, unlike in Kubernetes where it means bytes."""

    default_error_messages = {"invalid": 'Give memory as a Kubernetes quantity such as "16Gi" or "512Mi", or a '
                                         "number of GiB.",
                              "fraction": "{value} is {size} bytes; memory is a whole number of bytes, e.g. "
                                          '"16Gi" or "512Mi".'}

    def to_internal_value(self, data: Any) -> Decimal:
        number = _number(data)
        if number is not None:
            return number
        match = QUANTITY.match(data) if isinstance(data, str) else None
        if match is None or match["suffix"] == "m":
            self.fail("invalid")
        amount = Decimal(match["number"])
        if match["suffix"] is None:
            return amount
        size = amount * _SUFFIX_BYTES[match["suffix"]]
        if size != size.to_integral_value():
            self.fail("fraction", value=data.strip(), size=format(size.normalize(), "f"))
        gib = size / _GIB
        try:
            return gib.quantize(_HUNDREDTH, rounding=ROUND_CEILING)
        except InvalidOperation:  # too many digits for any pod; the service refuses it with the model's bounds
            return gib

    def to_representation(self, value: Decimal) -> str:
        return str(value)


class LabelsSerializer(serializers.Serializer):
    """The mandatory audit labels (Kubernetes label values)."""

    model = StrictCharField(source="model_label", allow_blank=True, trim_whitespace=False,
                                  error_messages={"required": "The model audit label is required."},
                                  help_text="The model this work trains or serves, e.g. resnet50.")
    data_class = StrictCharField(allow_blank=True, trim_whitespace=False,
                                       error_messages={"required": "The data class audit label is required."},
                                       help_text="The class of data it reads, e.g. public or internal.")

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        if isinstance(data, Mapping) and (unknown := set(data) - {"model", "data_class"}):
            raise serializers.ValidationError(
                {name: ["Only the model and data_class labels are set here."] for name in sorted(unknown)})
        return super().to_internal_value(data)


@extend_schema_field({
    "oneOf": [{"type": "number", "minimum": 0.01, "maximum": 0.99}, {"type": "string"}], "nullable": True,
    "description": "A share of one GPU for a single pod on a KAI pool with GPU fractions (KAI Scheduler's "
                   "gpu-fraction), in hundredths, e.g. 0.5; `gpus` is then 0. Refused on other pools and for work "
                   "of several pods at once. Null or absent: whole GPUs.",
    "example": 0.5,
})
class GpuFractionField(serializers.Field):
    """A share of one GPU: a JSON number (or a numeric string) as a Decimal; its range and where it may be asked for
    are the service's to check (apps.workloads.validation.gpu_fraction_errors), with every other refusal."""

    default_error_messages = {"invalid": "Give a share of one GPU as a number, e.g. 0.5."}

    def to_internal_value(self, data: Any) -> Decimal:
        number = _number(data)
        if number is None and isinstance(data, str) and not holds_nul(data):
            try:
                number = Decimal(data.strip())
            except InvalidOperation:
                number = None
        if number is None or not number.is_finite():
            self.fail("invalid")
        return number

    def to_representation(self, value: Decimal) -> float:
        return float(value)


class GpusField(AsciiIntegerField):
    """Whole GPUs per pod; 0 when left out of a submission that asks for a GPU fraction (and required otherwise)."""

    def get_value(self, dictionary: Any) -> Any:
        value = super().get_value(dictionary)
        if value is empty and isinstance(dictionary, Mapping) and dictionary.get("gpu_fraction") not in (None, ""):
            return 0
        return value
