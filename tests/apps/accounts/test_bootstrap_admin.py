"""`manage.py bootstrap_admin` makes the first installation admin, once; django-admin manages bindings and rules for
break-glass use, through the audited services."""

from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from apps.accounts import access
from apps.accounts.access import Action
from apps.accounts.models import GroupRoleRule, Role, RoleBinding, Scope
from apps.core.models import AuditEvent

STRONG = "correct-horse-battery-staple-42"


def bootstrap(*args: str) -> str:
    out = StringIO()
    call_command("bootstrap_admin", *args, stdout=out)
    return out.getvalue()


def test_creates_the_admin_with_its_binding_and_a_second_run_changes_nothing(db, tmp_path):
    secret = tmp_path / "password"
    secret.write_text(STRONG + "\n")
    output = bootstrap("--username", "root", "--email", "root@example.com", "--password-file", str(secret))
    assert "'root' is the installation admin." in output
    user = get_user_model().objects.get(username="root")
    assert user.check_password(STRONG) and user.is_staff and user.is_superuser and user.email == "root@example.com"
    binding = RoleBinding.objects.get(user=user)
    assert (binding.role, binding.scope) == (Role.ADMIN, Scope.EVERYTHING)
    assert access.can(user, Action.MANAGE)
    audited = set(AuditEvent.objects.filter(action__in=["user.bootstrap_admin", "role_binding.create"],
                                            object_repr__contains="root").values_list("action", "object_id"))
    assert audited == {("user.bootstrap_admin", str(user.pk)), ("role_binding.create", str(binding.pk))}
    rows = AuditEvent.objects.count()

    again = bootstrap("--username", "root", "--password-file", str(secret))
    assert again.strip() == "'root' is an installation admin already; nothing changed."
    assert AuditEvent.objects.count() == rows and RoleBinding.objects.filter(user=user).count() == 1


def test_reads_the_environment_through_settings(db, settings):
    settings.PORTAL_ADMIN_USERNAME, settings.PORTAL_ADMIN_EMAIL = "ops", "ops@example.com"
    settings.PORTAL_ADMIN_PASSWORD = STRONG
    bootstrap()
    assert get_user_model().objects.get(username="ops").check_password(STRONG)


def test_production_refuses_a_weak_password_and_creates_nothing(db, settings):
    settings.PRODUCTION = True
    settings.PORTAL_ADMIN_PASSWORD = "password"
    with pytest.raises(CommandError, match="too common"):
        bootstrap("--username", "root")
    assert not get_user_model().objects.filter(username="root").exists()


def test_an_existing_superuser_without_a_binding_gets_one_and_keeps_its_password(db):
    user = get_user_model().objects.create_superuser("legacy", "legacy@example.com", STRONG)
    assert not access.can(user, Action.MANAGE)
    output = bootstrap("--username", "legacy")
    assert "bound 'legacy' to the admin role over everything" in output and "created" not in output
    user = get_user_model().objects.get(pk=user.pk)  # a fresh instance: the old one cached its grants
    assert user.check_password(STRONG) and access.can(user, Action.MANAGE)


def test_without_a_username_or_a_new_admin_without_password_it_says_what_is_missing(db):
    with pytest.raises(CommandError, match="PORTAL_ADMIN_USERNAME"):
        bootstrap()
    with pytest.raises(CommandError, match="needs a password"):
        bootstrap("--username", "nobody-yet")


@pytest.fixture
def superuser_client(db, client):
    """A superuser with no portal binding: the break-glass case."""
    user = get_user_model().objects.create_superuser("glass", "glass@example.com", STRONG)
    client.force_login(user)
    return client, user


def test_django_admin_adds_a_binding_through_the_service(superuser_client, demo):
    client, user = superuser_client
    response = client.post("/django-admin/accounts/rolebinding/add/", {"user": user.pk, "role": Role.ADMIN})
    assert response.status_code == 302
    binding = RoleBinding.objects.get(user=user)
    assert binding.scope == Scope.EVERYTHING
    event = AuditEvent.objects.get(action="role_binding.create", object_id=str(binding.pk))
    assert event.actor == user

    duplicate = client.post("/django-admin/accounts/rolebinding/add/", {"user": user.pk, "role": Role.ADMIN})
    assert duplicate.status_code == 200 and "This binding already exists." in duplicate.content.decode()
    assert RoleBinding.objects.filter(user=user).count() == 1


def test_django_admin_deletes_bindings_through_the_service(superuser_client, demo):
    client, _ = superuser_client
    binding = RoleBinding.objects.filter(user=demo["alice"]).first()
    response = client.post(f"/django-admin/accounts/rolebinding/{binding.pk}/delete/", {"post": "yes"})
    assert response.status_code == 302 and not RoleBinding.objects.filter(pk=binding.pk).exists()
    assert AuditEvent.objects.filter(action="role_binding.delete", object_id=str(binding.pk)).exists()


def test_django_admin_group_rules_are_validated_and_audited(superuser_client, demo):
    client, user = superuser_client
    refused = client.post("/django-admin/accounts/grouprolerule/add/", {"group_pattern": "*", "role": Role.VIEWER})
    assert refused.status_code == 200 and "matches every group" in refused.content.decode()
    response = client.post("/django-admin/accounts/grouprolerule/add/",
                           {"group_pattern": "gpu-viewers", "role": Role.VIEWER, "description": "read-only"})
    assert response.status_code == 302
    rule = GroupRoleRule.objects.get(group_pattern="gpu-viewers")
    change = client.post(f"/django-admin/accounts/grouprolerule/{rule.pk}/change/",
                         {"group_pattern": "gpu-readers", "role": Role.VIEWER, "description": "read-only"})
    assert change.status_code == 302
    actions = list(AuditEvent.objects.filter(object_id=str(rule.pk), object_type="grouprolerule").order_by(
        "id").values_list("action", "actor"))
    assert actions == [("group_role_rule.create", user.pk), ("group_role_rule.update", user.pk)]
