"""apps/org/policies.glob_within: a narrower image pattern is within a wider one only when the wider matches every
image the narrower does."""

import pytest

from apps.org.policies import MAX_IMAGE_PATTERN, glob_within


@pytest.mark.parametrize(("narrow", "wide"), [
    ("nvcr.io/nvidia/*", "nvcr.io/*"), ("*", "*"), ("nvcr.io/nvidia/pytorch:24.0?", "nvcr.io/*"),
    ("team-?", "team-*"), ("team-a", "team-?"), ("a?c", "a?c"), ("a**b", "a*b"), ("a*b", "a**b"),
    ("x*y*z", "*"), ("nvcr.io/a*b*c", "nvcr.io/*c"),
])
def test_within(narrow, wide):
    assert glob_within(narrow, wide)


@pytest.mark.parametrize(("narrow", "wide"), [
    ("team-*", "team-?"),  # the text matches (? takes *), the images do not: team-anything
    ("*", "nvcr.io/*"), ("nvcr.io/*", "nvcr.io/nvidia/*"), ("a*", "a*b"), ("ab?", "a?b"), ("abc", "abd"),
    ("a?", "a"), ("?", "a"),
])
def test_not_within(narrow, wide):
    assert not glob_within(narrow, wide)


def test_the_longest_patterns_full_of_wildcards_are_answered_exactly():
    """100 stars against 100 stars (an automaton over the pieces, no backtracking): "a*a*..." also matches images
    ending in another letter, which "*a*a...*a" does not."""
    narrow, wide = "a*" * (MAX_IMAGE_PATTERN // 2), "*a" * (MAX_IMAGE_PATTERN // 2)
    assert not glob_within(narrow, wide)
    assert glob_within(narrow + "a", "a*" * (MAX_IMAGE_PATTERN // 2 - 1) + "a")
