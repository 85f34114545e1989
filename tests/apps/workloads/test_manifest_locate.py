"""Where each refusal points in a manifest's text: the line of the field its path names (keys with dots are one step),
of the nearest field there for a missing one, the parser's own line for text that is no YAML, none for the whole."""

from __future__ import annotations

import json

from apps.workloads.manifests import Located, locate_errors

TEXT = """apiVersion: batch/v1
kind: Job
metadata:
  name: my-job
spec:
  template:
    spec:
      containers:
      - name: main
        resources:
          limits:
            nvidia.com/gpu: 2
      - name: second
        image: busybox
"""


def lines(text: str, messages: list[str]) -> list[int | None]:
    return [found.line for found in locate_errors(text, messages)]


def test_a_path_points_at_its_key():
    assert lines(TEXT, ["metadata.name: bad.", "spec.template.spec.containers[1].image: bad."]) == [4, 14]


def test_a_key_with_dots_is_one_step():
    assert lines(TEXT, ["spec.template.spec.containers[0].resources.limits.nvidia.com/gpu: must equal."]) == [12]


def test_a_missing_field_points_at_the_nearest_one_there():
    assert lines(TEXT, ["spec.template.spec.containers[0].image: required.",
                        "spec.template.spec.containers[5].name: x.", "spec.suspend: x."]) == [9, 8, 5]


def test_messages_about_the_whole_text_have_no_line_and_keep_their_words():
    found = locate_errors(TEXT, ["manifest: 300 pods; at most 256.", "(the object): bad.", "This field is required."])
    assert found == [Located(None, "", "300 pods; at most 256."), Located(None, "(the object)", "bad."),
                     Located(None, "", "This field is required.")]
    assert [str(item) for item in found] == ["300 pods; at most 256.", "(the object): bad.", "This field is required."]


def test_the_parsers_position_is_used_when_the_text_is_no_yaml():
    message = "manifest: not valid YAML or JSON at line 3, column 7: found unexpected end of stream."
    assert lines("a: 1\nb: [\n", [message]) == [3]


def test_json_text_is_located_too():
    text = json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                       "spec": {"containers": [{"name": "c"}]}}, indent=2)
    expected = next(number for number, line in enumerate(text.splitlines(), 1) if '"name": "c"' in line) - 1
    assert lines(text, ["spec.containers[0].image: required."]) == [expected]
