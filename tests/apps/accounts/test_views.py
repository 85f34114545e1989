"""Login, logout and the role-binding pages: scoped lists, grants within the granter's scope, audit rows."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse

from apps.accounts.models import RoleBinding
from apps.core.models import AuditEvent
from apps.org.models import Department, Project

LIST = reverse("accounts:role_bindings")
CREATE = reverse("accounts:role_binding_create")


def form_errors(response) -> list[str]:
    return [message for messages in response.context["form"].errors.values() for message in messages]


def test_login_page_and_sign_in(users, client):
    assert client.get(reverse("accounts:login")).status_code == 200
    users["alice"].set_password("pw-for-test")
    users["alice"].save()
    response = client.post(reverse("accounts:login"), {"username": "alice", "password": "pw-for-test"})
    assert response.status_code == 302 and response.url == reverse("org:overview")
    client.post(reverse("accounts:logout"))
    wrong = client.post(reverse("accounts:login"), {"username": "alice", "password": "nope"})
    assert wrong.status_code == 200 and "Please enter a correct username and password" in wrong.content.decode()


def test_logout_is_post_only(page_client):
    client = page_client("alice")
    assert client.get(reverse("accounts:logout")).status_code == 405
    response = client.post(reverse("accounts:logout"))
    assert response.status_code == 302 and response.url == reverse("accounts:login")
    assert client.get(reverse("org:overview")).status_code == 302


def test_list_is_scoped(page_client):
    deptadmin = page_client("deptadmin").get(LIST).context["rows"]
    names = {row["binding"].user.username for row in deptadmin if row["binding"].user_id}
    assert {"deptadmin", "lead", "alice", "bob"} <= names
    assert "carol" not in names and "admin" not in names
    removable = {row["binding"].user.username for row in deptadmin if row["can_delete"]}
    assert removable == {"deptadmin", "lead", "alice", "bob"}
    bob = page_client("bob").get(LIST).context["rows"]
    assert {row["binding"].user.username for row in bob} == {"bob"}
    assert not any(row["can_delete"] for row in bob)


def test_department_admin_grants_inside_their_department(page_client, users):
    research = Department.objects.get(slug="research")
    vision = Project.objects.get(slug="vision")
    client = page_client("deptadmin")
    form = client.get(CREATE).context["form"]
    assert [value for value, _ in form.fields["role"].choices] == ["department_admin", "team_lead", "researcher",
                                                                   "viewer"]
    scope_values = [value for _, group in form.fields["scope"].choices for value, _ in group]
    assert scope_values == [f"department:{research.pk}", f"project:{Project.objects.get(slug='nlp').pk}",
                            f"project:{vision.pk}"]
    response = client.post(CREATE, {"username": "carol", "role": "researcher", "scope": f"project:{vision.pk}"},
                           follow=True)
    assert "Granted Researcher to user:carol at project:vision." in response.content.decode()
    binding = RoleBinding.objects.get(user__username="carol", project=vision)
    event = AuditEvent.objects.get(action="role_binding.create", object_id=str(binding.pk))
    assert event.actor == users["deptadmin"] and event.project == vision and event.before is None
    assert event.after["role"] == "researcher"


@pytest.mark.parametrize(("payload", "message"), [
    ({"username": "carol", "role": "admin"}, "Select a valid choice. admin is not one of the available choices."),
    ({"username": "carol", "role": "viewer", "scope": "department:production"},
     "Select a valid choice."),
    ({"username": "carol", "role": "viewer", "scope": "everything"}, "Select a valid choice."),
    ({"username": "nobody", "role": "viewer"}, "There is no user called 'nobody'."),
    ({"role": "viewer"}, "Choose a user or a group (exactly one)."),
    ({"username": "lead", "role": "team_lead"}, "This binding already exists."),
])
def test_department_admin_refusals(page_client, payload, message):
    research = Department.objects.get(slug="research")
    data = {"scope": f"department:{research.pk}", **payload}
    if data["scope"] == "department:production":
        data["scope"] = f"department:{Department.objects.get(slug='production').pk}"
    count = RoleBinding.objects.count()
    response = page_client("deptadmin").post(CREATE, data)
    assert response.status_code == 200
    assert any(message in text for text in form_errors(response)), form_errors(response)
    assert RoleBinding.objects.count() == count


def test_admin_grants_admin_only_over_everything(page_client):
    research = Department.objects.get(slug="research")
    client = page_client("admin")
    scoped = client.post(CREATE, {"username": "carol", "role": "admin", "scope": f"department:{research.pk}"})
    assert any("Admins are granted over everything" in text for text in form_errors(scoped))
    assert not RoleBinding.objects.filter(user__username="carol", role="admin").exists()
    everywhere = client.post(CREATE, {"username": "carol", "role": "admin", "scope": "everything"})
    assert everywhere.status_code == 302
    assert RoleBinding.objects.filter(user__username="carol", role="admin", scope="everything").exists()


def test_group_binding(page_client):
    group = Group.objects.create(name="vision-team")
    vision = Project.objects.get(slug="vision")
    response = page_client("deptadmin").post(CREATE, {"group": group.pk, "role": "viewer",
                                                      "scope": f"project:{vision.pk}"})
    assert response.status_code == 302
    assert RoleBinding.objects.filter(group=group, project=vision, role="viewer").exists()
    both = page_client("deptadmin").post(CREATE, {"username": "carol", "group": group.pk, "role": "viewer",
                                                  "scope": f"project:{vision.pk}"})
    assert "Choose a user or a group (exactly one)." in form_errors(both)


def test_delete_binding_writes_audit_and_last_admin_stays(page_client, users):
    alice = RoleBinding.objects.get(user__username="alice")
    response = page_client("deptadmin").post(reverse("accounts:role_binding_delete", args=[alice.pk]), follow=True)
    assert "Removed user:alice researcher @ project:vision." in response.content.decode()
    event = AuditEvent.objects.get(action="role_binding.delete", object_id=str(alice.pk))
    assert event.actor == users["deptadmin"] and event.after is None and event.before["role"] == "researcher"
    admin = RoleBinding.objects.get(user__username="admin")
    refused = page_client("admin").post(reverse("accounts:role_binding_delete", args=[admin.pk]), follow=True)
    assert "This is the last admin binding; add another admin first." in refused.content.decode()
    assert RoleBinding.objects.filter(pk=admin.pk).exists()


def test_no_remove_on_the_last_hand_made_admin_binding(page_client, users):
    admin = RoleBinding.objects.get(user__username="admin")
    delete_url = reverse("accounts:role_binding_delete", args=[admin.pk])
    rows = {row["binding"].pk: row["can_delete"] for row in page_client("admin").get(LIST).context["rows"]}
    assert rows[admin.pk] is False
    assert delete_url not in page_client("admin").get(LIST).content.decode()
    # A second admin granted by hand: each of the two may now go.
    second = RoleBinding.objects.create(user=users["carol"], role="admin", scope="everything")
    rows = {row["binding"].pk: row["can_delete"] for row in page_client("admin").get(LIST).context["rows"]}
    assert rows[admin.pk] is True and rows[second.pk] is True


def test_removing_a_binding_asks_first(page_client):
    alice = RoleBinding.objects.get(user__username="alice")
    url = reverse("accounts:role_binding_delete", args=[alice.pk])
    listing = page_client("deptadmin").get(LIST).content.decode()
    assert f'href="{url}"' in listing and 'data-confirm="Remove role binding user:alice researcher' in listing
    question = page_client("deptadmin").get(url)
    content = question.content.decode()
    assert question.status_code == 200 and "Remove role binding user:alice researcher @ project:vision?" in content
    assert f'href="{LIST}"' in content and 'method="post"' in content
    assert RoleBinding.objects.filter(pk=alice.pk).exists()
