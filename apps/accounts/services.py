"""Writes to role bindings, IdP group rules, single-sign-on identities and API tokens: access-checked, one
transaction, audited."""

from __future__ import annotations

import hashlib
import secrets
import string
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.contrib.auth.password_validation import validate_password
from django.contrib.auth.validators import UnicodeUsernameValidator
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone

from apps.core.actors import Actor
from apps.core.audit import audit_record, snapshot
from apps.core.services import version_check

from . import access
from .access import forget_grants, is_manual_admin, lock_manual_admin_bindings, may_grant
from .models import (
    BindingSource,
    ExternalIdentity,
    GroupRoleRule,
    NotificationPreference,
    PersonalAccessToken,
    Role,
    RoleBinding,
    Scope,
)


def _audit_scope(binding: RoleBinding) -> dict[str, Any]:
    if binding.project_id:
        return {"project": binding.project}
    if binding.department_id:
        return {"department": binding.department}
    return {}


def role_binding_create(
    *,
    actor: Actor,
    role: str,
    user: Actor | None = None,
    group: Group | None = None,
    department: Any = None,
    project: Any = None,
) -> RoleBinding:
    """Bind a role to a user or group at everything, a department or a project (the narrowest one given)."""
    if project is not None and department is not None:
        raise ValidationError("Choose a department or a project as the scope, not both.")
    scope = Scope.PROJECT if project else Scope.DEPARTMENT if department else Scope.EVERYTHING
    binding = RoleBinding(user=user, group=group, role=role, scope=scope, department=department, project=project)
    if role not in Role.values:
        raise ValidationError({"role": f"Choose one of: {', '.join(Role.values)}."})
    if not may_grant(actor, role, project or department):
        raise PermissionDenied("You may not grant this role at this scope.")
    with transaction.atomic():
        binding.full_clean()
        if role_binding_exists(user=user, group=group, role=role, department=department, project=project):
            raise ValidationError("This binding already exists.")
        binding.save()
        audit_record(actor=actor, action="role_binding.create", obj=binding, before=None, after=snapshot(binding),
                     **_audit_scope(binding))
    if user is not None:
        forget_grants(user)
    return binding


def role_binding_delete(*, actor: Actor, binding: RoleBinding) -> None:
    if not may_grant(actor, binding.role, binding.scope_object):
        raise PermissionDenied("You may not remove this binding.")
    if binding.source == BindingSource.GROUP_RULE:
        raise ValidationError("This binding comes from an IdP group rule and follows the user's groups: change the "
                              "rule (Access > IdP group rules) or the user's groups at the identity provider.")
    with transaction.atomic():
        if is_manual_admin(binding):
            manual_admins = lock_manual_admin_bindings()
            if binding.pk not in manual_admins:
                raise ValidationError("This binding was removed meanwhile; reload the list.")
            if len(manual_admins) <= 1:
                raise ValidationError("This is the last admin binding; add another admin first.")
        audit_record(actor=actor, action="role_binding.delete", obj=binding, before=snapshot(binding), after=None,
                     **_audit_scope(binding))
        binding.delete()


def role_binding_exists(*, user: Actor | None, group: Group | None, role: str, department: Any, project: Any) -> bool:
    """Whether this binding was granted by hand already (creating it again is refused)."""
    scope = Scope.PROJECT if project else Scope.DEPARTMENT if department else Scope.EVERYTHING
    return RoleBinding.objects.filter(user=user, group=group, role=role, scope=scope, department=department,
                                      project=project, source=BindingSource.MANUAL).exists()


@dataclass(frozen=True)
class AdminBootstrap:
    user: Actor
    changes: list[str]


def _admin_account(user: Actor) -> dict[str, Any]:
    """What an audit row keeps of the installation admin's account (never the password hash)."""
    return {"username": user.get_username(), "email": user.email, "is_staff": user.is_staff,
            "is_superuser": user.is_superuser, "is_active": user.is_active}


def installation_admin_bootstrap(*, username: str, email: str, password: str) -> AdminBootstrap:
    """Make `username` an installation admin: the account (staff and superuser, for django-admin break-glass use)
    and its admin binding over everything, each change audited. Idempotent: an existing account keeps its password
    and e-mail, and an admin that is complete already changes nothing (`changes` is empty).

    In production the password must pass Django's validators (AUTH_PASSWORD_VALIDATORS)."""
    user_model = get_user_model()
    changes: list[str] = []
    with transaction.atomic():
        user = user_model.objects.select_for_update().filter(username=username).first()
        if user is None:
            candidate = user_model(username=username, email=email, is_staff=True, is_superuser=True)
            UnicodeUsernameValidator()(username)
            if not password:
                raise ValidationError("A new admin needs a password (PORTAL_ADMIN_PASSWORD or --password-file).")
            if settings.PRODUCTION:
                validate_password(password, candidate)
            candidate.set_password(password)
            candidate.save()
            user = candidate
            audit_record(actor=None, action="user.bootstrap_admin", obj=user, before=None, after=_admin_account(user))
            changes.append(f"created the account {username!r}")
        elif not (user.is_staff and user.is_superuser and user.is_active):
            before = _admin_account(user)
            user.is_staff = user.is_superuser = user.is_active = True
            user.save(update_fields=["is_staff", "is_superuser", "is_active"])
            audit_record(actor=None, action="user.bootstrap_admin", obj=user, before=before,
                         after=_admin_account(user))
            changes.append(f"made {username!r} an active staff superuser")
        if not RoleBinding.objects.filter(user=user, role=Role.ADMIN, scope=Scope.EVERYTHING).exists():
            binding = RoleBinding.objects.create(user=user, role=Role.ADMIN, scope=Scope.EVERYTHING)
            audit_record(actor=None, action="role_binding.create", obj=binding, before=None, after=snapshot(binding))
            changes.append(f"bound {username!r} to the admin role over everything")
    forget_grants(user)
    return AdminBootstrap(user=user, changes=changes)


def notification_preference_set(*, user: Actor, on_admitted: bool, on_preempted: bool, on_finished: bool,
                                on_failed: bool, on_idle: bool = False) -> NotificationPreference:
    """A user's own e-mail opt-ins (their own setting: no audit row)."""
    preference, _ = NotificationPreference.objects.update_or_create(user=user, defaults={
        "on_admitted": on_admitted, "on_preempted": on_preempted, "on_finished": on_finished, "on_failed": on_failed,
        "on_idle": on_idle,
    })
    return preference


# --- IdP group rules -> role bindings ---------------------------------------------------------------------------

BindingKey = tuple[str, str, int | None, int | None]  # role, scope, department id, project id


def _rule_key(rule: GroupRoleRule) -> BindingKey:
    return rule.role, rule.scope, rule.department_id, rule.project_id


def _binding_key(binding: RoleBinding) -> BindingKey:
    return binding.role, binding.scope, binding.department_id, binding.project_id


def _desired_bindings(rules: Iterable[GroupRoleRule], groups: Iterable[str]) -> dict[BindingKey, GroupRoleRule]:
    """One binding per (role, scope) that some rule gives one of the groups; the oldest such rule is its maker."""
    groups = list(groups)
    desired: dict[BindingKey, GroupRoleRule] = {}
    for rule in sorted(rules, key=lambda r: r.pk):
        if any(rule.matches(group) for group in groups):
            desired.setdefault(_rule_key(rule), rule)
    return desired


def _sync_rule_bindings(*, actor: Actor | None, user: Actor, desired: dict[BindingKey, GroupRoleRule],
                        existing: list[RoleBinding]) -> tuple[int, int]:
    """Make the user's rule-made bindings exactly `desired` (hand-made bindings are never touched).
    Returns (created, removed). Runs inside the caller's transaction."""
    kept: dict[BindingKey, RoleBinding] = {}
    removed = 0
    for binding in existing:
        key = _binding_key(binding)
        if key in desired and key not in kept:
            kept[key] = binding
            rule = desired[key]
            if binding.rule_id != rule.pk:
                RoleBinding.objects.filter(pk=binding.pk).update(rule=rule)
            continue
        audit_record(actor=actor, action="role_binding.delete", obj=binding, before=snapshot(binding), after=None,
                     **_audit_scope(binding))
        binding.delete()
        removed += 1
    created = 0
    for key, rule in desired.items():
        if key in kept:
            continue
        binding = RoleBinding(user=user, role=rule.role, scope=rule.scope, department_id=rule.department_id,
                              project_id=rule.project_id, source=BindingSource.GROUP_RULE, rule=rule)
        binding.save()
        audit_record(actor=actor, action="role_binding.create", obj=binding, before=None, after=snapshot(binding),
                     **_audit_scope(binding))
        created += 1
    forget_grants(user)
    return created, removed


def _sync_everyone(*, actor: Actor) -> None:
    """After a rule changed: every single-sign-on user's rule-made bindings, from the groups of their last sign-in."""
    rules = list(GroupRoleRule.objects.all())
    existing: dict[int, list[RoleBinding]] = {}
    for binding in RoleBinding.objects.filter(source=BindingSource.GROUP_RULE, user__isnull=False).select_related(
        "department", "project__department"
    ):
        existing.setdefault(binding.user_id, []).append(binding)  # type: ignore[arg-type]
    seen: set[int] = set()
    for identity in ExternalIdentity.objects.select_related("user"):
        seen.add(identity.user_id)
        _sync_rule_bindings(actor=actor, user=identity.user, desired=_desired_bindings(rules, identity.groups),
                            existing=existing.get(identity.user_id, []))
    for user_id, orphans in existing.items():  # rule-made bindings of users no identity vouches for any more
        if user_id not in seen:
            user = orphans[0].user
            assert user is not None  # the bindings were read with user__isnull=False
            _sync_rule_bindings(actor=actor, user=user, desired={}, existing=orphans)


def group_role_rule_errors(*, group_pattern: str, role: str, department: Any, project: Any,
                 exclude_pk: int | None = None) -> dict[str, list[str]]:
    errors: dict[str, list[str]] = {}
    if not group_pattern:
        errors.setdefault("group_pattern", []).append("Give an IdP group name or a pattern such as gpu-*-users.")
    elif len(group_pattern) > 200:
        errors.setdefault("group_pattern", []).append("At most 200 characters.")
    elif group_pattern.strip("*?") == "":
        errors.setdefault("group_pattern", []).append(
            "A pattern of only wildcards matches every group; name the groups (e.g. gpu-*)."
        )
    if role not in Role.values:
        errors.setdefault("role", []).append(f"Choose one of: {', '.join(Role.values)}.")
    if department is not None and project is not None:
        errors.setdefault("__all__", []).append("Choose a department or a project as the scope, not both.")
    if role == Role.ADMIN and (department is not None or project is not None):
        errors.setdefault("role", []).append("Admins are granted over everything: choose the scope Everything.")
    if not errors:
        scope = Scope.PROJECT if project else Scope.DEPARTMENT if department else Scope.EVERYTHING
        duplicate = GroupRoleRule.objects.filter(group_pattern=group_pattern, role=role, scope=scope,
                                                 department=department, project=project)
        if exclude_pk is not None:
            duplicate = duplicate.exclude(pk=exclude_pk)
        if duplicate.exists():
            errors.setdefault("__all__", []).append("A rule with this group, role and scope already exists.")
    return errors


def _rule_audit_scope(rule: GroupRoleRule) -> dict[str, Any]:
    if rule.project_id:
        return {"project": rule.project}
    if rule.department_id:
        return {"department": rule.department}
    return {}


def group_role_rule_create(*, actor: Actor, group_pattern: str, role: str, department: Any = None,
                           project: Any = None, description: str = "") -> GroupRoleRule:
    """A rule giving `role` at the scope (everything, a department or a project) to members of matching groups."""
    access.require_rule_manager(actor)
    group_pattern = group_pattern.strip()
    errors = group_role_rule_errors(group_pattern=group_pattern, role=role, department=department, project=project)
    if errors:
        raise ValidationError(errors)
    scope = Scope.PROJECT if project else Scope.DEPARTMENT if department else Scope.EVERYTHING
    with transaction.atomic():
        rule = GroupRoleRule(group_pattern=group_pattern, role=role, scope=scope, department=department,
                             project=project, description=description.strip())
        rule.full_clean()
        rule.save()
        audit_record(actor=actor, action="group_role_rule.create", obj=rule, before=None, after=snapshot(rule),
                     **_rule_audit_scope(rule))
        _sync_everyone(actor=actor)
    return rule


def group_role_rule_update(*, actor: Actor, rule: GroupRoleRule, group_pattern: str, role: str, department: Any = None,
                           project: Any = None, description: str = "",
                           expected_version: int | None = None) -> GroupRoleRule:
    """Change a rule; `expected_version` is the version the change was read at (a stale one raises StaleWrite)."""
    access.require_rule_manager(actor)
    group_pattern = group_pattern.strip()
    errors = group_role_rule_errors(group_pattern=group_pattern, role=role, department=department, project=project,
                          exclude_pk=rule.pk)
    if errors:
        raise ValidationError(errors)
    with transaction.atomic():
        rule = GroupRoleRule.objects.select_for_update().get(pk=rule.pk)
        version_check(rule, expected_version, label=f"the rule for {rule.group_pattern}")
        before = snapshot(rule)
        rule.group_pattern, rule.role, rule.description = group_pattern, role, description.strip()
        rule.department, rule.project = department, project
        rule.scope = Scope.PROJECT if project else Scope.DEPARTMENT if department else Scope.EVERYTHING
        rule.full_clean()
        rule.save()
        audit_record(actor=actor, action="group_role_rule.update", obj=rule, before=before, after=snapshot(rule),
                     **_rule_audit_scope(rule))
        _sync_everyone(actor=actor)
    return rule


def group_role_rule_delete(*, actor: Actor, rule: GroupRoleRule) -> None:
    """Remove the rule; the bindings it alone made go with it (audited one by one)."""
    access.require_rule_manager(actor)
    with transaction.atomic():
        audit_record(actor=actor, action="group_role_rule.delete", obj=rule, before=snapshot(rule), after=None,
                     **_rule_audit_scope(rule))
        rule.delete()
        _sync_everyone(actor=actor)


# --- single sign-on -----------------------------------------------------------------------------------------------


class SignInRefused(Exception):
    """A single sign-on the portal will not accept; the message is shown on the login page."""


def oidc_sign_in(*, issuer: str, subject: str, username: str, email: str = "", first_name: str = "",
                 last_name: str = "", groups: Iterable[str] = ()) -> Actor:
    """The user of a single-sign-on identity, created or updated from its claims, with the rule-made role bindings
    brought in step with its groups (README "Groups and roles").

    The identity (issuer, subject) is the key: a user is linked to one identity at their first single sign-on (an
    existing user of the same username included) and a different identity never takes that username over.
    """
    if not issuer or not subject:
        raise SignInRefused("The identity provider's token names no issuer or subject.")
    try:
        UnicodeUsernameValidator()(username)
    except ValidationError:
        raise SignInRefused(f"The identity provider's username {username!r} is not a valid portal username "
                            "(letters, digits and @.+-_ only, at most 150 characters).") from None
    if not username or len(username) > 150:
        raise SignInRefused("The identity provider gave no usable username.")
    group_names = sorted({str(group) for group in groups if isinstance(group, str) and group})
    user_model = get_user_model()
    now = timezone.now()
    with transaction.atomic():
        identity = (ExternalIdentity.objects.select_for_update().select_related("user")
                    .filter(issuer=issuer, subject=subject).first())
        same_name = user_model.objects.select_for_update().filter(username=username).first()
        if identity is not None:
            user = identity.user
            if same_name is not None and same_name.pk != user.pk:
                raise SignInRefused(f"The username {username!r} belongs to another portal user; ask an admin.")
        elif same_name is not None:
            if ExternalIdentity.objects.filter(user=same_name).exists():
                raise SignInRefused(f"The username {username!r} is linked to another single-sign-on identity; "
                                    "ask an admin.")
            user = same_name
            identity = ExternalIdentity.objects.create(user=user, issuer=issuer, subject=subject)
            audit_record(actor=None, action="user.link_identity", obj=user, before=None,
                         after={"issuer": issuer, "subject": subject})
        else:
            user = user_model(username=username)
            user.set_unusable_password()
            user.save()
            identity = ExternalIdentity.objects.create(user=user, issuer=issuer, subject=subject)
            audit_record(actor=None, action="user.create", obj=user, before=None,
                         after={"username": username, "issuer": issuer, "subject": subject})
        changes = {name: value for name, value in (("username", username), ("email", email),
                                                   ("first_name", first_name[:150]), ("last_name", last_name[:150]))
                   if getattr(user, name) != value}
        if changes:
            for name, value in changes.items():
                setattr(user, name, value)
            user.save(update_fields=list(changes))
        identity.groups = group_names
        identity.last_sign_in_at = now
        identity.save(update_fields=["groups", "last_sign_in_at"])
        existing = list(RoleBinding.objects.filter(user=user, source=BindingSource.GROUP_RULE)
                        .select_related("department", "project__department"))
        _sync_rule_bindings(actor=None, user=user,
                            desired=_desired_bindings(GroupRoleRule.objects.all(), group_names), existing=existing)
    return user


# --- personal access tokens ---------------------------------------------------------------------------------------

TOKEN_PREFIX = "gpp_"  # noqa: S105 - marks a portal token (secret scanners can look for it), not a secret
_TOKEN_ALPHABET = string.ascii_letters + string.digits
_TOKEN_RANDOM_LENGTH = 36  # 40 characters in all; about 214 random bits


def token_digest(secret: str) -> str:
    """What is stored of a secret: its SHA-256 (the secrets are long and random, so a fast hash is enough)."""
    return hashlib.sha256(secret.encode()).hexdigest()


def _token_snapshot(token: PersonalAccessToken) -> dict[str, Any]:
    data = {name: value.isoformat() if isinstance(value, datetime) else value
            for name, value in snapshot(token).items()}
    data.pop("digest", None)  # not the secret, but nothing an audit reader needs
    return data


def personal_token_create(*, user: Actor, name: str, expires_at: datetime | None = None
                          ) -> tuple[PersonalAccessToken, str]:
    """A new token of `user`; returns it with its secret, which is never stored nor shown again."""
    now = timezone.now()
    name = (name or "").strip()
    errors: dict[str, list[str]] = {}
    if not name:
        errors["name"] = ["Name the token after what will use it (e.g. laptop, CI pipeline)."]
    elif len(name) > 100:
        errors["name"] = ["At most 100 characters."]
    if expires_at is None:
        expires_at = now + timedelta(days=settings.API_TOKEN_DEFAULT_DAYS)
    latest = now + timedelta(days=settings.API_TOKEN_MAX_DAYS)
    if expires_at <= now:
        errors["expires_at"] = ["Choose an expiry in the future."]
    elif expires_at > latest + timedelta(days=1):  # a date picked on the last allowed day is fine
        errors["expires_at"] = [f"Tokens live at most {settings.API_TOKEN_MAX_DAYS} days: choose "
                                f"{latest:%Y-%m-%d} or earlier."]
    if errors:
        raise ValidationError(errors)
    expires_at = min(expires_at, latest)
    secret = TOKEN_PREFIX + "".join(secrets.choice(_TOKEN_ALPHABET) for _ in range(_TOKEN_RANDOM_LENGTH))
    with transaction.atomic():
        token = PersonalAccessToken.objects.create(user=user, name=name, digest=token_digest(secret),
                                                   prefix=secret[:8], expires_at=expires_at)
        audit_record(actor=user, action="api_token.create", obj=token, before=None, after=_token_snapshot(token))
    return token, secret


def personal_token_revoke(*, actor: Actor, token: PersonalAccessToken) -> PersonalAccessToken:
    """Revoke the token at once (its owner, or an admin); revoking a revoked token changes nothing."""
    if not access.can_revoke_token(actor, token):
        raise PermissionDenied("You may not revoke this token.")
    now = timezone.now()
    with transaction.atomic():
        before = _token_snapshot(token)
        if PersonalAccessToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(revoked_at=now):
            token.revoked_at = now
            audit_record(actor=actor, action="api_token.revoke", obj=token, before=before,
                         after=_token_snapshot(token))
        else:
            token.refresh_from_db(fields=["revoked_at"])
    return token


def personal_token_touch(*, token: PersonalAccessToken, now: datetime) -> None:
    """Stamp "last used", at most once a minute per token (a conditional UPDATE; no audit row: use is not change)."""
    interval = timedelta(seconds=settings.API_TOKEN_TOUCH_INTERVAL)
    if token.last_used_at is not None and now - token.last_used_at < interval:
        return
    PersonalAccessToken.objects.filter(pk=token.pk).update(last_used_at=now)
    token.last_used_at = now
