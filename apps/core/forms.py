"""Form helpers every app's pages share: services' refusals onto fields, error styling."""

from __future__ import annotations

from django import forms
from django.core.exceptions import NON_FIELD_ERRORS, ValidationError


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


class StyledForm(forms.Form):
    """Marks fields with errors so the stylesheet can outline them. Number fields take ASCII digits only: Django's
    int() would read U+0661 (Arabic-Indic one) as 1, a silent coercion of what the user typed."""

    error_css_class = "field-error"
    required_css_class = "required"

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
