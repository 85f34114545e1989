"""The admins' page of work the portal cannot count as a project's (UnmappedWork): every row with its reason, detail,
GPUs and when it was first and last seen; linked from the Cluster menu and the queue pages for admins only, 404 for
everyone else; a fixed number of queries however many rows."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from apps.cluster.models import UnmappedWork
from apps.org.models import Project

UNMAPPED = reverse("usage:unmapped")


def unmapped(name: str, *, namespace: str = "team-x", reason: str = UnmappedWork.Reason.NO_PROJECT, gpus: int = 0,
             project: str | None = None, **extra) -> UnmappedWork:
    now = timezone.now()
    return UnmappedWork.objects.create(
        uid=f"uid-{namespace}-{name}", namespace=namespace, name=name, reason=reason, gpus=gpus,
        project=Project.objects.get(slug=project) if project else None, first_seen_at=now - timedelta(hours=2),
        seen_at=now, **extra)


def test_admins_see_every_unmapped_object_with_why(page_client):
    unmapped("job-elsewhere-1a2b3", object_kind="Job", detail="namespace team-x belongs to no project", gpus=4)
    unmapped("rogue", namespace="proj-vision", reason=UnmappedWork.Reason.OUTSIDE_QUEUE, gpus=1, project="vision",
             object_kind="Pod", detail="1 GPU pod(s) without a queue label")
    response = page_client("admin").get(UNMAPPED)
    assert response.status_code == 200
    content = response.content.decode()
    assert "job-elsewhere-1a2b3" in content and "Its namespace belongs to no project" in content
    assert "namespace team-x belongs to no project" in content
    assert "Runs outside the queue" in content and "(vision)" in content
    # The most GPUs first.
    assert content.index("job-elsewhere-1a2b3") < content.index("rogue")
    assert ">None<" not in content


@pytest.mark.parametrize("username", ["deptadmin", "lead", "alice", "viewer", "carol"])
def test_everyone_but_admins_gets_404(page_client, username):
    unmapped("job-never-shown-q7")
    response = page_client(username).get(UNMAPPED)
    assert response.status_code == 404 and b"job-never-shown-q7" not in response.content


def test_signing_in_is_required(client):
    response = client.get(UNMAPPED)
    assert response.status_code == 302 and "login" in response["Location"]


@pytest.mark.parametrize(("username", "linked"), [("admin", True), ("deptadmin", False), ("alice", False)])
def test_linked_from_the_cluster_menu_and_the_queue_pages_for_admins(page_client, username, linked):
    client = page_client(username)
    for page in (reverse("usage:queues"), reverse("org:overview")):
        assert (f'href="{UNMAPPED}"' in client.get(page).content.decode()) is linked, page


def test_an_empty_page_says_so(page_client):
    assert "the portal counts all the work it sees" in page_client("admin").get(UNMAPPED).content.decode()


def test_a_fixed_number_of_queries_and_pages(page_client, django_assert_num_queries):
    client = page_client("admin")
    unmapped("first", project="vision", namespace="proj-vision", reason=UnmappedWork.Reason.NO_QUEUE)
    client.get(UNMAPPED)
    with django_assert_num_queries(5):  # session, user, grants, count, the page of rows with their projects
        client.get(UNMAPPED)
    for number in range(120):
        unmapped(f"more-{number}", project="nlp", namespace="proj-nlp", reason=UnmappedWork.Reason.MALFORMED)
    with django_assert_num_queries(5):
        first = client.get(UNMAPPED)
    assert first.content.decode().count("data-unmapped=") == 100 and "Page 1 of 2" in first.content.decode()
    second = client.get(UNMAPPED, {"page": 2})
    assert second.content.decode().count("data-unmapped=") == 21
    assert client.get(UNMAPPED, {"page": "x\x00"}).status_code == 200
