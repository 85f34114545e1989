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


class StyledForm(forms.Form):
    """Marks fields with errors so the stylesheet can outline them; the field templates mark required ones."""

    error_css_class = "field-error"
    required_css_class = "required"

    @property
    def any_required(self) -> bool:
        """Whether a visible field must be filled in (the form then says what its asterisk means)."""
        return any(field.field.required for field in self.visible_fields())
