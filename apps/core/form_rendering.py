"""The form renderer (settings.FORM_RENDERER): Django's own, except that selects and inputs are written in Python.

Django renders each `<option>` through a template of its own; a filter form with a select of a hundred projects
then cost more than the table of rows under it. An `<input>` goes through three templates (its type's, input.html
and attrs.html), which cost a short form's page more than its queries. `PortalFormRenderer` writes
`django/forms/widgets/select.html` with its standard options, and the input types whose template is only
input.html, byte for byte as those templates do (tests/apps/core/test_form_rendering.py compares them), and leaves
every other template, and any select whose options use another template, to Django.
"""

from __future__ import annotations

from typing import Any

from django.forms.renderers import DjangoTemplates
from django.utils.html import conditional_escape, escape
from django.utils.safestring import SafeData

SELECT = "django/forms/widgets/select.html"
OPTION = "django/forms/widgets/select_option.html"
# Django's widget templates that are `{% include "django/forms/widgets/input.html" %}` and nothing else.
INPUTS = frozenset(f"django/forms/widgets/{kind}.html" for kind in (
    "checkbox", "color", "date", "datetime", "email", "file", "hidden", "number", "password", "search", "tel", "text",
    "time", "url"))


def _attrs(attrs: dict[str, Any]) -> str:
    """As django/forms/widgets/attrs.html: ` name="value"`, a bare ` name` for True, nothing for False."""
    parts = []
    for name, value in attrs.items():
        if value is True:
            parts.append(f" {conditional_escape(name)}")
        elif value is not False:
            parts.append(f' {conditional_escape(name)}="{conditional_escape(str(value))}"')
    return "".join(parts)


def render_select(widget: dict[str, Any]) -> str | None:
    """The select of a widget context as Django's templates write it; None when an option has its own template."""
    parts = [f'<select name="{conditional_escape(widget["name"])}"{_attrs(widget["attrs"])}>']
    for group_name, options, _index in widget["optgroups"]:
        if group_name:
            parts.append(f'\n  <optgroup label="{conditional_escape(group_name)}">')
        for option in options:
            if option["template_name"] != OPTION:
                return None
            parts.append(f'\n  <option value="{conditional_escape(str(option["value"]))}"{_attrs(option["attrs"])}>'
                         f'{conditional_escape(option["label"])}</option>\n')
        if group_name:
            parts.append("\n  </optgroup>")
    parts.append("\n</select>")
    return "".join(parts)


def _stringformat(value: Any) -> str:
    """`{{ value|stringformat:'s' }}`: "%s" of the value (of a tuple, its str; nothing when that fails), escaped
    unless the value was marked safe (the filter keeps that mark)."""
    try:
        text = "%s" % (str(value) if isinstance(value, tuple) else value)
    except (ValueError, TypeError):
        return ""
    return text if isinstance(value, SafeData) else escape(text)


def render_input(widget: dict[str, Any]) -> str:
    """django/forms/widgets/input.html with its attrs.html, as Django's renderer returns it (stripped)."""
    value = "" if widget["value"] is None else f' value="{_stringformat(widget["value"])}"'
    attrs = "".join(f" {conditional_escape(name)}" if attr is True else
                    f' {conditional_escape(name)}="{_stringformat(attr)}"'
                    for name, attr in widget["attrs"].items() if attr is not False)
    return f'<input type="{conditional_escape(widget["type"])}" name="{conditional_escape(widget["name"])}"{value}' \
           f"{attrs}>"


class PortalFormRenderer(DjangoTemplates):
    def render(self, template_name: str, context: dict[str, Any], request: Any = None) -> str:
        if template_name in INPUTS:
            return render_input(context["widget"])
        if template_name == SELECT:
            rendered = render_select(context["widget"])
            if rendered is not None:
                return rendered
        return super().render(template_name, context, request)
