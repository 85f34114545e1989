"""Form helpers every app's pages share: services' refusals onto fields, error styling."""

from __future__ import annotations

from typing import Any

from django import forms
from django.core.exceptions import NON_FIELD_ERRORS, ValidationError

from .http import parse_id


def apply_service_errors(form: forms.Form, exc: ValidationError, aliases: dict[str, str] | None = None) -> None:
    """Put a service's ValidationError onto the form: per field where the form has that field, else on top.

    `aliases` maps a model field name to the form field that edits it (card_fraction_numerator -> card_fraction).
    """
    aliases = aliases or {}
    if not hasattr(exc, "error_dict"):
        for message in exc.messages:
            form.add_error(None, message)
        return
    for name, errors in exc.message_dict.items():
        target: str | None = aliases.get(name, name)
        if target == NON_FIELD_ERRORS or target not in form.fields:
            target = None
        for message in errors:
            form.add_error(target, message)


NUMBER_FIELDS = (forms.IntegerField, forms.DecimalField, forms.FloatField)


def _raw_values(form: forms.Form, name: str, field: forms.Field) -> list[Any]:
    """What the request sent for a field: every value of a multiple choice, else the one value."""
    key = form.add_prefix(name)
    if isinstance(field, forms.ModelMultipleChoiceField) and hasattr(form.data, "getlist"):
        return list(form.data.getlist(key))
    return [form.data.get(key)]


def _names_row_by_id(field: forms.Field) -> bool:
    """A model choice whose values are the rows' ids (no to_field_name): Django looks them up with int()."""
    return isinstance(field, forms.ModelChoiceField) and not field.to_field_name


class StyledForm(forms.Form):
    """Marks fields with errors so the stylesheet can outline them; the field templates mark required ones. Number
    fields take ASCII digits only: Django's int() would read U+0661 (Arabic-Indic one) as 1, a silent coercion of
    what the user typed. So do the ids of model choices (a project, a pool, a priority class picked by id): U+0661
    would pick row 1."""

    error_css_class = "field-error"
    required_css_class = "required"

    @property
    def any_required(self) -> bool:
        """Whether a visible field must be filled in (the form then says what its asterisk means)."""
        return any(field.field.required for field in self.visible_fields())

    def full_clean(self) -> None:
        super().full_clean()
        if not self.is_bound:
            return
        for name, field in self.fields.items():
            raw = self.data.get(self.add_prefix(name))
            if isinstance(field, NUMBER_FIELDS) and isinstance(raw, str) and not raw.isascii():
                self.errors.pop(name, None)
                self.add_error(name, forms.ValidationError("Write the number with the digits 0-9.",
                                                           code="ascii_digits"))
            elif _names_row_by_id(field) and not field.disabled:
                unicode_ids = [raw for raw in _raw_values(self, name, field)
                               if isinstance(raw, str) and not raw.isascii()]
                if unicode_ids:
                    self.errors.pop(name, None)
                    self.add_error(name, forms.ValidationError(
                        field.error_messages["invalid_choice"], code="invalid_choice",
                        params={"value": unicode_ids[0]}))


VERSION_MISSING = ("This form does not say which version of the row it was read at, so saving it could undo "
                   "someone else's change. Nothing was saved; reload the page and make your change again.")


class VersionedForm(StyledForm):
    """An edit form that carries, in a hidden field, the version of the row it was rendered from; after is_valid()
    `expected_version` holds it for the service's `expected_version` (a missing or garbled one is a form error on
    top: a page always says what it read). Create forms (no row) carry none."""

    expected_version: int | None = None

    def carry_version(self, instance: Any) -> None:
        """Call from __init__ when the form edits `instance`."""
        self.fields["version"] = forms.CharField(widget=forms.HiddenInput, required=False)
        self.initial["version"] = instance.version  # with the other initial values the page renders

    def clean(self) -> dict[str, Any]:
        super().clean()
        if "version" in self.fields:
            self.expected_version = parse_id(self.cleaned_data.pop("version", None))
            if self.expected_version is None:
                self.add_error(None, VERSION_MISSING)
        return self.cleaned_data
