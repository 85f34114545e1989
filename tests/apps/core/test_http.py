"""Strict id parsing and conditional polling, shared by every app's views."""

from __future__ import annotations

import pytest
from django.http import HttpResponse
from django.test import RequestFactory

from apps.core.http import conditional_poll, parse_id, parse_int, poll_etag, reference_lookup


@pytest.mark.parametrize(("value", "expected"), [
    ("7", 7), (7, 7), ("0", None), ("", None), (None, None), ("-1", None), ("1e3", None), ("7.0", None),
    ("²", None), ("\u0661", None), ("\uff17", None), (" 7", None), ("7\x00", None), (True, None),
    (str(2**63), None), (str(2**63 - 1), 2**63 - 1),
])
def test_parse_id_accepts_only_plain_positive_ascii_integers(value, expected):
    assert parse_id(value) == expected


@pytest.mark.parametrize(("value", "expected"), [
    ("7", {"pk": 7}), (7, {"pk": 7}), ("vision", {"slug": "vision"}),
    # Unicode digits are names (a slug check then refuses them), never ids: '²' would raise, U+0661 read as 1.
    ("²", {"slug": "²"}), ("\u0661", {"slug": "\u0661"}),
    ("0", None), (str(2**63), None), ("", None), ("a\x00", None), (None, None), (True, None), (["7"], None),
])
def test_reference_lookup_reads_ascii_digits_as_an_id_and_anything_else_as_a_name(value, expected):
    assert reference_lookup(value, name_field="slug") == expected


def test_reference_lookup_without_a_name_field_takes_ids_only():
    assert reference_lookup("vision", name_field=None) is None
    assert reference_lookup("7", name_field=None) == {"pk": 7}


def test_parse_int_accepts_zero():
    assert parse_int("0") == 0
    assert parse_int("²") is None


def test_a_poll_with_the_current_tag_is_answered_304_without_rendering():
    rendered = []
    etag = poll_etag("user", 1, "marker")

    def render() -> HttpResponse:
        rendered.append(True)
        return HttpResponse("body")

    fresh = conditional_poll(RequestFactory().get("/"), etag, render)
    assert fresh.status_code == 200 and fresh["ETag"] == etag and rendered == [True]
    assert fresh["Cache-Control"] == "private, no-cache" and "HX-Request" in fresh["Vary"]
    repeat = conditional_poll(RequestFactory().get("/", HTTP_IF_NONE_MATCH=etag), etag, render)
    assert repeat.status_code == 304 and repeat["ETag"] == etag and rendered == [True]
    changed = conditional_poll(RequestFactory().get("/", HTTP_IF_NONE_MATCH=poll_etag("user", 1, "old")), etag,
                               render)
    assert changed.status_code == 200 and rendered == [True, True]
