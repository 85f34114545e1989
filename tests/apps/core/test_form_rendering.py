"""The portal's form renderer writes selects as Django's own templates do, byte for byte, however many options."""

from __future__ import annotations

import pytest
from django import forms
from django.forms.renderers import DjangoTemplates
from django.utils.safestring import mark_safe

from apps.core.form_rendering import PortalFormRenderer


class Choices(forms.Form):
    plain = forms.ChoiceField(choices=[("", "(any)"), ("a", "Alpha"), ("b", "B & <b>"), (3, "three")],
                              help_text="pick one", required=False)
    grouped = forms.ChoiceField(choices=[("Fruit", [("apple", "Apple"), ("pear", 'Pear "green"')]),
                                         ("none", "None at all")])
    many = forms.MultipleChoiceField(choices=[(str(i), f"Project {i}") for i in range(120)], required=False)
    flags = forms.ChoiceField(choices=[("x", "X")], widget=forms.Select(attrs={"data-on": True, "data-off": False,
                                                                              "data-q": 'say "hi"'}))
    safe = forms.ChoiceField(choices=[("s", mark_safe("<em>safe</em>"))])
    radio = forms.ChoiceField(choices=[("r", "R")], widget=forms.RadioSelect)


@pytest.mark.parametrize("data", [None, {"plain": "b", "grouped": "pear", "many": ["3", "77"], "flags": "x"},
                                  {"plain": "<script>", "grouped": "nope"}])
def test_every_field_renders_as_djangos_templates_do(data):
    ours = Choices(data, renderer=PortalFormRenderer())
    django = Choices(data, renderer=DjangoTemplates())
    for name in ours.fields:
        assert str(ours[name]) == str(django[name]), name


def test_the_settings_use_it(settings):
    from django.forms.renderers import get_default_renderer

    get_default_renderer.cache_clear()
    try:
        assert isinstance(get_default_renderer(), PortalFormRenderer)
    finally:
        get_default_renderer.cache_clear()
