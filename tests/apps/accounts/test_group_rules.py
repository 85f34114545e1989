"""IdP group rules: admin-only pages (all errors at once), audited services, and rule-made bindings that only the
rules change."""

from __future__ import annotations

import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from apps.accounts import services
from apps.accounts.models import BindingSource, ExternalIdentity, GroupRoleRule, RoleBinding
from apps.core.models import AuditEvent
from apps.org.models import Department, Project


def errors(response) -> str:
    return response.content.decode()


@pytest.mark.parametrize("username", ["deptadmin", "lead", "alice", "viewer"])
def test_only_admins_see_and_edit_rules(client_for, demo, username):
    client = client_for(username)
    assert client.get("/accounts/group-rules/").status_code == 403
    assert client.post("/accounts/group-rules/new/", {"group_pattern": "x", "role": "viewer",
                                                      "scope": "everything"}).status_code == 403
    rule = services.group_role_rule_create(actor=demo["admin"], group_pattern="staff", role="viewer")
    assert client.post(f"/accounts/group-rules/{rule.pk}/edit/", {}).status_code == 403
    assert client.post(f"/accounts/group-rules/{rule.pk}/delete/").status_code == 403
    with pytest.raises(PermissionDenied):
        services.group_role_rule_delete(actor=demo[username], rule=rule)
    assert GroupRoleRule.objects.count() == 1


def test_admin_creates_edits_and_deletes_rules_with_audit(client_for, demo, django_assert_num_queries):
    client = client_for("admin")
    research = Department.objects.get(slug="research")
    response = client.post("/accounts/group-rules/new/", {"group_pattern": " research-* ", "role": "team_lead",
                                                          "scope": f"department:{research.pk}",
                                                          "description": "leads"})
    assert response.status_code == 302
    rule = GroupRoleRule.objects.get()
    assert (rule.group_pattern, rule.role, rule.scope, rule.department) == ("research-*", "team_lead", "department",
                                                                            research)
    vision = Project.objects.get(slug="vision")
    response = client.post(f"/accounts/group-rules/{rule.pk}/edit/", {"group_pattern": "gpu-vision",
                                                                       "role": "researcher",
                                                                       "scope": f"project:{vision.pk}",
                                                                       "version": rule.version})
    assert response.status_code == 302
    rule.refresh_from_db()
    assert (rule.group_pattern, rule.scope, rule.project, rule.department) == ("gpu-vision", "project", vision, None)
    services.group_role_rule_create(actor=demo["admin"], group_pattern="staff", role="viewer")
    with django_assert_num_queries(4):  # session, user, grants, rules with their scopes and binding counts
        page = client.get("/accounts/group-rules/")
    assert "gpu-vision" in page.text and "staff" in page.text
    assert client.get(f"/accounts/group-rules/{rule.pk}/delete/").status_code == 200
    assert client.post(f"/accounts/group-rules/{rule.pk}/delete/").status_code == 302
    assert list(AuditEvent.objects.filter(object_type="grouprolerule").order_by("id").values_list("action", flat=True)
                ) == ["group_role_rule.create", "group_role_rule.update", "group_role_rule.create",
                      "group_role_rule.delete"]


def test_form_reports_all_errors_at_once(client_for):
    research = Department.objects.get(slug="research")
    response = client_for("admin").post("/accounts/group-rules/new/", {
        "group_pattern": "**", "role": "admin", "scope": f"department:{research.pk}"})
    assert response.status_code == 200
    page = errors(response)
    assert "A pattern of only wildcards matches every group" in page
    assert "Admins are granted over everything" in page
    assert not GroupRoleRule.objects.exists()
    response = client_for("admin").post("/accounts/group-rules/new/", {"group_pattern": "", "role": "nope",
                                                                       "scope": "department:999999"})
    page = errors(response)
    assert page.count('class="errorlist"') >= 3  # pattern, role and scope, in one answer


def test_duplicate_rules_are_refused(demo):
    services.group_role_rule_create(actor=demo["admin"], group_pattern="staff", role="viewer")
    with pytest.raises(ValidationError, match="already exists"):
        services.group_role_rule_create(actor=demo["admin"], group_pattern="staff", role="viewer")


@pytest.mark.parametrize(("pattern", "group", "matches"), [
    ("gpu-users", "gpu-users", True), ("gpu-users", "GPU-users", False), ("gpu-*", "gpu-vision", True),
    ("gpu-*", "xgpu-vision", False), ("team-?", "team-a", True), ("team-?", "team-ab", False),
    ("[admins]", "[admins]", True), ("[admins]", "a", False),
])
def test_pattern_semantics(pattern, group, matches):
    assert GroupRoleRule(group_pattern=pattern).matches(group) is matches


def test_rule_made_bindings_are_not_removed_by_hand(client_for, demo):
    rule = services.group_role_rule_create(actor=demo["admin"], group_pattern="staff", role="viewer")
    ExternalIdentity.objects.create(user=demo["carol"], issuer="https://idp", subject="c", groups=["staff"])
    services.group_role_rule_update(actor=demo["admin"], rule=rule, group_pattern="staff", role="viewer",
                                    description="everyone")  # re-applies the rules from the stored groups
    binding = RoleBinding.objects.get(user=demo["carol"], source=BindingSource.GROUP_RULE)
    page = client_for("admin").get("/accounts/role-bindings/").text
    row = page.split(f'data-binding="{binding.pk}"')[1].split("</tr>")[0]
    assert "IdP group rule" in row and "Remove" not in row
    response = client_for("admin").post(f"/accounts/role-bindings/{binding.pk}/delete/")
    assert response.status_code == 400  # the confirm page again, with the refusal
    assert "comes from an IdP group rule" in response.text
    assert RoleBinding.objects.filter(pk=binding.pk).exists()
    with pytest.raises(ValidationError, match="comes from an IdP group rule"):
        services.role_binding_delete(actor=demo["admin"], binding=binding)
    # A hand-made binding identical to a rule-made one may be granted (it outlives the group).
    services.role_binding_create(actor=demo["admin"], user=demo["carol"], role="viewer")
    assert RoleBinding.objects.filter(user=demo["carol"], role="viewer", scope="everything").count() == 2


def test_last_admin_must_be_a_hand_made_one(demo):
    rule = services.group_role_rule_create(actor=demo["admin"], group_pattern="ops", role="admin")
    ExternalIdentity.objects.create(user=demo["viewer"], issuer="https://idp", subject="v", groups=["ops"])
    services.group_role_rule_update(actor=demo["admin"], rule=rule, group_pattern="ops", role="admin")
    assert RoleBinding.objects.filter(role="admin", source=BindingSource.GROUP_RULE).count() == 1
    own = RoleBinding.objects.get(user=demo["admin"], role="admin")
    with pytest.raises(ValidationError, match="last admin"):
        services.role_binding_delete(actor=demo["viewer"], binding=own)


def test_a_stale_rule_save_is_refused_saying_what_changed(client_for, demo):
    rule = services.group_role_rule_create(actor=demo["admin"], group_pattern="gpu-*", role="viewer")
    client = client_for("admin")
    read = int(client.get(f"/accounts/group-rules/{rule.pk}/edit/").context["form"]["version"].value())
    services.group_role_rule_update(actor=demo["admin"], rule=rule, group_pattern="gpu-*", role="researcher",
                                    project=Project.objects.get(slug="vision"))
    audit_rows = AuditEvent.objects.count()
    response = client.post(f"/accounts/group-rules/{rule.pk}/edit/", {
        "group_pattern": "gpu-*", "role": "viewer", "scope": "everything", "description": "mine", "version": read})
    assert response.status_code == 200
    message = " ".join(response.context["form"].non_field_errors())
    assert "The rule for gpu-* was changed by admin since you opened it" in message
    assert "role" in message and "project" in message
    rule.refresh_from_db()
    assert (rule.role, rule.description, rule.version) == ("researcher", "", read + 1)
    assert AuditEvent.objects.count() == audit_rows
    missing = client.post(f"/accounts/group-rules/{rule.pk}/edit/", {
        "group_pattern": "gpu-*", "role": "viewer", "scope": "everything"})
    assert missing.status_code == 200 and "does not say which version" in missing.content.decode()
    fresh = client.post(f"/accounts/group-rules/{rule.pk}/edit/", {
        "group_pattern": "gpu-*", "role": "viewer", "scope": "everything", "version": read + 1})
    assert fresh.status_code == 302
    rule.refresh_from_db()
    assert (rule.role, rule.version) == ("viewer", read + 2)
