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


class Inputs(forms.Form):
    text = forms.CharField(max_length=20, help_text="any", initial='a "quoted" <value> & more')
    number = forms.IntegerField(min_value=1, max_value=100, widget=forms.NumberInput(attrs={"step": 5, "data-on": True,
                                                                                          "data-off": False}))
    decimal = forms.DecimalField(required=False, initial=mark_safe("<b>1.5</b>"))
    flag = forms.BooleanField(required=False)
    email = forms.EmailField(required=False, widget=forms.EmailInput(attrs={"placeholder": mark_safe("<i>x</i>"),
                                                                           "data-t": (1, 2), "data-z": 0}))
    url = forms.URLField(required=False, assume_scheme="https")
    password = forms.CharField(widget=forms.PasswordInput(render_value=True))
    hidden = forms.CharField(widget=forms.HiddenInput, initial="h&idden")
    when = forms.DateTimeField(required=False, widget=forms.DateTimeInput(attrs={"type": "datetime-local"}))
    day = forms.DateField(required=False, widget=forms.DateInput)
    at = forms.TimeField(required=False, widget=forms.TimeInput)
    upload = forms.FileField(required=False, widget=forms.FileInput)
    other = forms.CharField(widget=forms.Textarea, required=False)  # not an input: left to Django


@pytest.mark.parametrize("data", [None, {"text": "<script>", "number": "7", "flag": "on", "password": "p\"w",
                                         "hidden": "x", "email": "a@b", "day": "2026-12-07", "at": "10:00"},
                                  {"number": "nope", "flag": "", "when": "bad <date>"}])
def test_every_input_renders_as_djangos_templates_do(data):
    ours = Inputs(data, renderer=PortalFormRenderer())
    django = Inputs(data, renderer=DjangoTemplates())
    for name in ours.fields:
        assert str(ours[name]) == str(django[name]), name
        assert "<input" in str(ours[name]) or name == "other"


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
