"""One submission, one workload: a submit form posted twice (its one-time token) and an API call repeated with its
`Idempotency-Key` make one row and one submit intent; a key reused for another body is refused."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from apps.core.models import Intent
from apps.workloads.models import Workload
from tests.api_support import call

from .helpers import submit_payload

GOOD: dict[str, Any] = {
    "project": "vision", "kind": "training", "name": "resnet-sweep-3", "image": "nvcr.io/nvidia/pytorch:24.05-py3",
    "command": ["python", "train.py"], "node_pool": "h100", "gpus": 1, "cpu": "4", "memory": "16Gi", "pods": 1,
    "labels": {"model": "resnet50", "data_class": "public"},
}


def submitted() -> tuple[int, int]:
    return Workload.objects.count(), Intent.objects.filter(kind="workload.submit").count()


# --- the submit form ------------------------------------------------------------------------------------------


def test_the_rendered_form_carries_a_new_token_each_time(page_client):
    client = page_client("alice")
    first = client.get(reverse("workloads:submit", args=["training"]))
    second = client.get(reverse("workloads:submit", args=["training"]))
    token = first.context["submission_token"]
    assert token != second.context["submission_token"] and len(token) >= 16
    assert f'name="submission_token" value="{token}"' in first.content.decode()


def test_posting_one_form_three_times_makes_one_workload_and_one_intent(page_client):
    client = page_client("alice")
    payload = submit_payload()
    responses = [client.post(reverse("workloads:submit", args=["training"]), payload) for _ in range(3)]
    workload = Workload.objects.get()
    assert submitted() == (1, 1)
    assert [response.status_code for response in responses] == [302, 302, 302]
    assert {response["Location"] for response in responses} == {reverse("workloads:detail", args=[workload.pk])}
    page = client.get(responses[-1]["Location"]).content.decode()
    assert "This form was submitted already" in page and "Nothing else was submitted." in page


def test_two_forms_make_two_workloads(page_client):
    client = page_client("alice")
    for name in ("first", "second"):
        assert client.post(reverse("workloads:submit", args=["training"]), submit_payload(name=name)).status_code == 302
    assert submitted() == (2, 2)


def test_a_token_is_per_user(page_client):
    payload = submit_payload()
    page_client("alice").post(reverse("workloads:submit", args=["training"]), payload)
    page_client("lead").post(reverse("workloads:submit", args=["training"]), payload)
    assert sorted(Workload.objects.values_list("owner__username", flat=True)) == ["alice", "lead"]


def test_a_refused_post_keeps_its_token_and_the_fixed_one_submits_once(page_client):
    client = page_client("alice")
    payload = submit_payload()
    refused = client.post(reverse("workloads:submit", args=["training"]), {**payload, "gpus": "999"})
    assert refused.status_code == 200 and refused.context["submission_token"] == payload["submission_token"]
    assert submitted() == (0, 0)
    for _ in range(2):
        client.post(reverse("workloads:submit", args=["training"]), payload)
    assert submitted() == (1, 1)


@pytest.mark.parametrize("token", [None, "", "short", "has spaces in it!!", "x" * 65])
def test_a_post_without_a_valid_token_submits_nothing(page_client, token):
    response = page_client("alice").post(reverse("workloads:submit", args=["training"]),
                                         submit_payload(submission_token=token))
    assert response.status_code == 200
    assert any("no valid submission token" in error for error in response.context["form"].non_field_errors())
    assert submitted() == (0, 0)


# --- the API's Idempotency-Key -----------------------------------------------------------------------------------


def test_a_repeated_idempotency_key_answers_the_first_workload(client_for):
    client = client_for("alice")
    first = call(client, "POST", "workloads/", GOOD, HTTP_IDEMPOTENCY_KEY="sweep-3-try")
    assert first.status_code == 201 and "Idempotent-Replayed" not in first
    again = call(client, "POST", "workloads/", GOOD, HTTP_IDEMPOTENCY_KEY="sweep-3-try")
    assert again.status_code == 201 and again["Idempotent-Replayed"] == "true"
    assert again.json() == first.json()
    assert submitted() == (1, 1)


def test_the_same_key_with_another_body_is_422_and_submits_nothing(client_for):
    client = client_for("alice")
    first = call(client, "POST", "workloads/", GOOD, HTTP_IDEMPOTENCY_KEY="k-1")
    other = call(client, "POST", "workloads/", {**GOOD, "gpus": 2}, HTTP_IDEMPOTENCY_KEY="k-1")
    assert other.status_code == 422
    detail = other.json()["detail"]
    assert "This Idempotency-Key was used for another request" in detail and str(first.json()["id"]) in detail
    assert submitted() == (1, 1)


def test_keys_are_per_user_and_requests_without_one_are_each_a_submission(client_for):
    call(client_for("alice"), "POST", "workloads/", GOOD, HTTP_IDEMPOTENCY_KEY="shared")
    assert call(client_for("lead"), "POST", "workloads/", GOOD, HTTP_IDEMPOTENCY_KEY="shared").status_code == 201
    assert submitted() == (2, 2)
    for _ in range(2):
        assert call(client_for("alice"), "POST", "workloads/", GOOD).status_code == 201
    assert submitted() == (4, 4)


def test_a_refused_submission_leaves_its_key_free(client_for):
    client = client_for("alice")
    assert call(client, "POST", "workloads/", {**GOOD, "gpus": 999}, HTTP_IDEMPOTENCY_KEY="k-2").status_code == 400
    assert call(client, "POST", "workloads/", GOOD, HTTP_IDEMPOTENCY_KEY="k-2").status_code == 201
    assert submitted() == (1, 1)


def test_form_tokens_and_api_keys_never_meet(client_for, page_client):
    payload = submit_payload()
    page_client("alice").post(reverse("workloads:submit", args=["training"]), payload)
    response = call(client_for("alice"), "POST", "workloads/", GOOD, HTTP_IDEMPOTENCY_KEY=payload["submission_token"])
    assert response.status_code == 201 and "Idempotent-Replayed" not in response
    assert submitted() == (2, 2)


@pytest.mark.parametrize("key", ["", "x" * 101, "has space", "é"])
def test_a_malformed_key_is_400(client_for, key):
    response = call(client_for("alice"), "POST", "workloads/", GOOD, HTTP_IDEMPOTENCY_KEY=key)
    assert response.status_code == 400 and "Idempotency-Key" in response.json()
    assert submitted() == (0, 0)
