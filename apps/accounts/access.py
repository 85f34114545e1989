"""The one place that answers "may this user do that to this object" and "which rows may this user see".

Every view, API view, service and task asks this module. Roles bound at a scope apply to everything below it
(everything > department > project). Rows a user may not see are simply absent from the querysets `restrict`
returns, so entry points answer 404 for them and leak no ids.

This module sits below the apps whose rows it scopes, so it imports none of them: each scoped model says where it
hangs off the scope tree, in the types of `apps.core.scopes`, and `restrict` / `can` read that:
- `access_paths` (an `AccessPaths`) on a model: the lookups from its rows to their department(s), project and owner;
- `access_scope()` on a department or project: (department id, project id or None) for `can`; on installation-wide
  rows (node pools, priority classes) None: everyone signed in views them, admins change them.

The questions take a `Visitor` (or None) and answer "no" for anyone not signed in.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol, TypeVar

from django.contrib.auth.models import Group
from django.core.exceptions import PermissionDenied
from django.db.models import Q, QuerySet

from apps.core.actors import Actor, Visitor
from apps.core.prepared import PreparedQuery
from apps.core.scopes import Scoped, ScopedModel, ScopedRows, ScopeNode

from .models import BindingSource, PersonalAccessToken, Role, RoleBinding, Scope

Rows = TypeVar("Rows", bound=ScopedRows[ScopedModel])
# Where `grants_for` keeps a user's grants for the rest of the request: an attribute of the user object.
_GRANTS_CACHE = "_portal_grants"


# The rows of the apps above as the rules below read them (this module imports none of their models).


class _Project(ScopeNode, Protocol):
    @property
    def notebooks_shared(self) -> bool: ...


class _Quota(Protocol):
    @property
    def owner(self) -> ScopeNode: ...  # its department or its project


class _Workload(Protocol):
    @property
    def owner_id(self) -> int | None: ...  # None: work from outside the portal no user is named on

    @property
    def project(self) -> _Project: ...


class Action(StrEnum):
    VIEW = "view"
    MANAGE = "manage"  # create, edit and delete the object itself (and a department's own quotas)
    MANAGE_PROJECTS = "manage_projects"  # create projects in a department, edit their deserved quota and limit
    EDIT_WEIGHT = "edit_weight"  # a project's over-quota weights and default priority class
    MANAGE_MEMBERS = "manage_members"  # role bindings at or below the scope
    VIEW_AUDIT = "view_audit"
    SUBMIT = "submit"  # submit workloads in a project
    STOP_ANY = "stop_any"  # stop anyone's workload in scope


ROLE_ACTIONS: dict[str, frozenset[Action]] = {
    Role.ADMIN: frozenset(Action),
    Role.DEPARTMENT_ADMIN: frozenset(
        {Action.VIEW, Action.MANAGE_PROJECTS, Action.EDIT_WEIGHT, Action.MANAGE_MEMBERS, Action.VIEW_AUDIT,
         Action.SUBMIT, Action.STOP_ANY}
    ),
    Role.TEAM_LEAD: frozenset({Action.VIEW, Action.EDIT_WEIGHT, Action.SUBMIT, Action.STOP_ANY}),
    Role.RESEARCHER: frozenset({Action.VIEW, Action.SUBMIT}),
    Role.VIEWER: frozenset({Action.VIEW}),
}
# Roles a member manager may hand out: only admins over everything create admins.
GRANTABLE_BY_MEMBER_MANAGERS = frozenset(
    {Role.DEPARTMENT_ADMIN, Role.TEAM_LEAD, Role.RESEARCHER, Role.VIEWER}
)


@dataclass(frozen=True)
class Grants:
    """A user's role bindings, indexed by scope; built once per request."""

    everywhere: frozenset[str] = frozenset()
    departments: dict[int, frozenset[str]] = field(default_factory=dict)
    projects: dict[int, frozenset[str]] = field(default_factory=dict)
    # department id of every project the user is bound to, so a project binding makes its department visible
    project_departments: dict[int, int] = field(default_factory=dict)

    def roles_for_department(self, department_id: int) -> frozenset[str]:
        return self.everywhere | self.departments.get(department_id, frozenset())

    def roles_for_project(self, project_id: int, department_id: int) -> frozenset[str]:
        return self.roles_for_department(department_id) | self.projects.get(project_id, frozenset())

    @property
    def all_roles(self) -> frozenset[str]:
        roles = set(self.everywhere)
        for scoped in (*self.departments.values(), *self.projects.values()):
            roles |= scoped
        return frozenset(roles)


def _actions(roles: frozenset[str]) -> frozenset[Action]:
    allowed: set[Action] = set()
    for role in roles:
        allowed |= ROLE_ACTIONS.get(role, frozenset())
    return frozenset(allowed)


def bindings_for(user: Actor) -> QuerySet[RoleBinding]:
    """Bindings that apply to the user directly or through a group."""
    return _bindings_of(user.pk)


def _bindings_of(user_pk: int) -> QuerySet[RoleBinding]:
    return RoleBinding.objects.filter(Q(user_id=user_pk) | Q(group__in=Group.objects.filter(user=user_pk)))


# What `grants_for` reads, compiled once per process (apps/core/prepared.py): every signed-in request reads it, and
# building and compiling it cost several times what the database takes to answer (docs/architecture.md, Serving the
# portal).
_GRANTS = PreparedQuery(lambda user_pk: _bindings_of(user_pk).values_list(
    "role", "scope", "department_id", "project_id", "project__department_id"), values=1)


def grants_for(user: Visitor | None) -> Grants:
    """The user's grants, cached on the user object for the rest of the request."""
    if user is None or not user.is_authenticated or not user.is_active:
        return Grants()
    cached: Grants | None = getattr(user, _GRANTS_CACHE, None)
    if cached is not None:
        return cached
    everywhere: set[str] = set()
    departments: dict[int, set[str]] = {}
    projects: dict[int, set[str]] = {}
    project_departments: dict[int, int] = {}
    for role, scope, department_id, project_id, project_department_id in _GRANTS.rows(user.pk):
        if scope == Scope.EVERYTHING:
            everywhere.add(role)
        elif scope == Scope.DEPARTMENT:
            departments.setdefault(department_id, set()).add(role)
        else:
            projects.setdefault(project_id, set()).add(role)
            project_departments[project_id] = project_department_id
    grants = Grants(
        everywhere=frozenset(everywhere),
        departments={key: frozenset(value) for key, value in departments.items()},
        projects={key: frozenset(value) for key, value in projects.items()},
        project_departments=project_departments,
    )
    setattr(user, _GRANTS_CACHE, grants)
    return grants


def forget_grants(user: Actor) -> None:
    """Drop the cached grants after the user's bindings changed within the same request."""
    if hasattr(user, _GRANTS_CACHE):
        delattr(user, _GRANTS_CACHE)


# --- "may U do A on O" ---------------------------------------------------------------------------------------


def can(user: Visitor | None, action: Action, obj: Scoped | None = None) -> bool:
    """May the user do the action on the object (None: on the whole installation, e.g. node pools)."""
    grants = grants_for(user)
    scope = obj.access_scope() if obj is not None else None
    if scope is None:
        # Installation-wide objects (node pools, priority classes): everyone signed in sees them, admins change them.
        if action == Action.VIEW:
            return bool(user is not None and user.is_authenticated and user.is_active)
        return action in _actions(grants.everywhere)
    department_id, project_id = scope
    if project_id is not None:
        return action in _actions(grants.roles_for_project(project_id, department_id))
    if action in _actions(grants.roles_for_department(department_id)):
        return True
    # Being bound to one of its projects lets a user see the department that contains it.
    return action == Action.VIEW and department_id in grants.project_departments.values()


def require(user: Visitor | None, action: Action, obj: Scoped | None = None,
            message: str = "You may not do this here.") -> None:
    """`can`, or PermissionDenied (403) with `message`."""
    if not can(user, action, obj):
        raise PermissionDenied(message)


def can_anywhere(user: Visitor | None, action: Action) -> bool:
    """Whether the user holds the action at any scope (drives navigation)."""
    return action in _actions(grants_for(user).all_roles)


def sees_everything(user: Visitor | None, action: Action = Action.VIEW) -> bool:
    """Whether the user holds the action over the whole installation (cluster-wide roll-ups, for example)."""
    return action in _actions(grants_for(user).everywhere)


def is_break_glass(user: Visitor | None) -> bool:
    """A Django superuser (`manage.py bootstrap_admin`, or createsuperuser from a shell on the installation) may
    always manage role bindings and group rules, in django-admin too: the way back in when no portal admin is left."""
    return bool(user is not None and user.is_authenticated and user.is_active and user.is_superuser)


def may_grant(user: Visitor | None, role: str, scope_object: Scoped | None) -> bool:
    """Whether the user may bind `role` at the scope of `scope_object` (a department, a project, None = everything)."""
    if is_break_glass(user):
        return role != Role.ADMIN or scope_object is None  # admins are granted over everything only
    if not can(user, Action.MANAGE_MEMBERS, scope_object):
        return False
    if role in GRANTABLE_BY_MEMBER_MANAGERS:
        return True
    return role in grantable_roles(user) and scope_object is None


def grantable_roles(user: Visitor | None) -> frozenset[str]:
    """The roles a member manager may offer at all: admins over everything also hand out admin (at that scope)."""
    if Action.MANAGE in _actions(grants_for(user).everywhere):
        return frozenset(Role.values)
    return GRANTABLE_BY_MEMBER_MANAGERS


def manual_admin_binding_count() -> int:
    """How many admin bindings over everything were granted by hand (rule-made ones come and go with IdP groups)."""
    return RoleBinding.objects.filter(role=Role.ADMIN, scope=Scope.EVERYTHING, source=BindingSource.MANUAL).count()


def lock_manual_admin_bindings() -> set[int]:
    """The ids of the hand-made admin bindings over everything, each row locked until the transaction ends: removals
    take turns, and each counts what the one before it left (a count read without the lock let parallel removals
    each see another admin and leave none). Call inside `transaction.atomic()`."""
    return set(RoleBinding.objects.filter(role=Role.ADMIN, scope=Scope.EVERYTHING, source=BindingSource.MANUAL)
               .order_by("pk").select_for_update().values_list("pk", flat=True))


def is_manual_admin(binding: RoleBinding) -> bool:
    """Whether `binding` is a hand-made admin binding over everything (one of those the installation keeps at least
    one of)."""
    return binding.role == Role.ADMIN and binding.scope == Scope.EVERYTHING and binding.source == BindingSource.MANUAL


def is_last_manual_admin(binding: RoleBinding, *, manual_admin_bindings: int) -> bool:
    """Whether removing `binding` would leave no hand-made admin: the installation would lose its way back in."""
    return is_manual_admin(binding) and manual_admin_bindings <= 1


def may_remove_binding(user: Visitor | None, binding: RoleBinding, *, manual_admin_bindings: int) -> bool:
    """Whether the page offers "Remove" for `binding`: hand-made, within what the user may grant, and not the last
    hand-made admin (`manual_admin_bindings` from `manual_admin_binding_count`, counted once per page)."""
    return (binding.source == BindingSource.MANUAL
            and not is_last_manual_admin(binding, manual_admin_bindings=manual_admin_bindings)
            and may_grant(user, binding.role, binding.scope_object))


# --- organisation rows: which fields of a quota or project this user may change ---------------------------------
# Field names of apps.org's Quota and Project (this module imports no app above it, so it names them as strings).

QUOTA_WEIGHT_FIELD = "over_quota_weight"
QUOTA_FIELDS = frozenset({"deserved", "limit", QUOTA_WEIGHT_FIELD, "cpu_cores", "memory_gib"})
PROJECT_DEFAULTS_FIELDS = frozenset({"default_priority_class"})
PROJECT_FIELDS = frozenset(
    {"slug", "name", "description", "department", "namespace", "does_not_lend", "notebooks_shared",
     *PROJECT_DEFAULTS_FIELDS}
)


def can_manage_quotas_of(user: Visitor | None, owner: ScopeNode) -> bool:
    """Whether the user creates, sizes and deletes the quotas of `owner` (a department or a project): admins a
    department's own quotas, department admins (and admins) its projects'."""
    _, project_id = owner.access_scope()
    return can(user, Action.MANAGE if project_id is None else Action.MANAGE_PROJECTS, owner)


def quota_fields_editable(user: Visitor | None, quota: _Quota) -> frozenset[str]:
    """The fields of `quota` (saved or proposed) the user may change: every field for those who manage its owner's
    quotas; only the over-quota weight of a project's quota for team leads (within the department's bounds, see
    `quota_weight_bounded`); nothing for anyone else."""
    owner = quota.owner
    if can_manage_quotas_of(user, owner):
        return QUOTA_FIELDS
    _, project_id = owner.access_scope()
    if project_id is not None and can(user, Action.EDIT_WEIGHT, owner):
        return frozenset({QUOTA_WEIGHT_FIELD})
    return frozenset()


def quota_weight_bounded(user: Visitor | None, quota: _Quota) -> bool:
    """Whether the user's weights for this quota must stay within the bounds an admin set on the department: true
    for team leads, whose right to the weight comes from EDIT_WEIGHT alone."""
    return not can_manage_quotas_of(user, quota.owner)


def project_fields_editable(user: Visitor | None, project: ScopeNode) -> frozenset[str]:
    """The fields of a project the user may change: all for those who manage the department's projects; the
    default priority class for team leads; nothing for anyone else."""
    if can(user, Action.MANAGE_PROJECTS, project):
        return PROJECT_FIELDS
    if can(user, Action.EDIT_WEIGHT, project):
        return PROJECT_DEFAULTS_FIELDS
    return frozenset()


def can_manage_budgets_of(user: Visitor | None, owner: ScopeNode) -> bool:
    """Whether the user creates, changes and deletes the budgets of `owner` (a department or a project): a
    department's for admins and its department admins; a project's also for its team leads."""
    _, project_id = owner.access_scope()
    return can(user, Action.MANAGE_PROJECTS if project_id is None else Action.EDIT_WEIGHT, owner)


def can_manage_budgets_somewhere(user: Visitor | None) -> bool:
    """Whether the budgets page offers the form at all (drives navigation and the API's POST)."""
    return can_anywhere(user, Action.EDIT_WEIGHT)


def can_manage_policy(user: Visitor | None, policy: Scoped) -> bool:
    """Whether the user creates, changes and deletes `policy` (saved or proposed), and previews the work it would
    refuse: the organisation's for admins; a department's or a project's for admins and the department's admins.
    Team leads and everyone else read the policies of what they see (docs/architecture.md, Policies)."""
    return can(user, Action.MANAGE if policy.access_scope() is None else Action.MANAGE_PROJECTS, policy)


def can_manage_policies_somewhere(user: Visitor | None) -> bool:
    """Whether the policies API accepts a new policy from the user at all (drives navigation and the POST)."""
    return can_anywhere(user, Action.MANAGE_PROJECTS)


def can_manage_notifications_of(user: Visitor | None, project: ScopeNode) -> bool:
    """Whether the user sets up the notification channels of a project (its leads, department admins and admins;
    docs/architecture.md, Notification channels). Anyone signed in sets up their own."""
    return can(user, Action.EDIT_WEIGHT, project)


def can_manage_notifications_somewhere(user: Visitor | None) -> bool:
    """Whether the pages offer project channels at all."""
    return can_anywhere(user, Action.EDIT_WEIGHT)


# --- sign-in: IdP group rules and API tokens ---------------------------------------------------------------------


def can_manage_group_rules(user: Visitor | None) -> bool:
    """IdP group rules hand out any role anywhere, admin included: only admins over everything see and edit them."""
    return is_break_glass(user) or can(user, Action.MANAGE)


def require_rule_manager(user: Visitor | None) -> None:
    """Refuse (403) anyone who may not manage IdP group rules (see can_manage_group_rules)."""
    if not can_manage_group_rules(user):
        raise PermissionDenied("Only admins manage IdP group rules.")


def can_revoke_token(user: Visitor | None, token: PersonalAccessToken) -> bool:
    """A token's owner revokes it; so does an admin (a leaked token must be stoppable without its owner)."""
    if user is None or not user.is_authenticated or not user.is_active:
        return False
    return token.user_id == user.pk or can(user, Action.MANAGE)


def tokens_for(user: Visitor | None) -> QuerySet[PersonalAccessToken]:
    """The API tokens a user lists and manages on "My tokens" and /api/v1/tokens/: their own."""
    if user is None or not user.is_authenticated:
        return PersonalAccessToken.objects.none()
    return PersonalAccessToken.objects.filter(user=user)


# --- workloads: stop and keep alive -----------------------------------------------------------------------------


def stops_own_workload(user: Visitor | None, workload: _Workload) -> bool:
    """Whether the user stops this workload as its owner (who may still submit in the project): no audit row."""
    return workload.owner_id is not None and workload.owner_id == getattr(user, "pk", None) and \
        can(user, Action.SUBMIT, workload.project)


def can_stop_workload(user: Visitor | None, workload: _Workload) -> bool:
    """Owners who may (still) submit in the project stop their own work; STOP_ANY stops anyone's in scope."""
    return stops_own_workload(user, workload) or can(user, Action.STOP_ANY, workload.project)


def starts_on_own_workloads(user: Visitor | None) -> bool:
    """Whether the workload list opens on the user's own work: researchers, whose scope is their own; team leads and
    admins, who look after others' work (STOP_ANY), and viewers, who own none, open on everything in their scope."""
    return can_anywhere(user, Action.SUBMIT) and not can_anywhere(user, Action.STOP_ANY)


def can_connect_notebook(user: Visitor | None, workload: _Workload) -> bool:
    """A notebook is its owner's desk: only the owner opens it, or the project's members (those who may submit there)
    when an admin marked the project `notebooks_shared`. Anyone else gets 404, as for a row they may not see."""
    if user is None or not user.is_authenticated or not user.is_active:
        return False
    if workload.owner_id is not None and workload.owner_id == user.pk:
        return True
    return bool(workload.project.notebooks_shared) and can(user, Action.SUBMIT, workload.project)


def can_reach_inference(user: Visitor | None, workload: _Workload) -> bool:
    """An inference service's endpoint through the portal: the members of its project (those who may submit
    there), whoever started it; anyone else gets 404."""
    if user is None or not user.is_authenticated or not user.is_active:
        return False
    return can(user, Action.SUBMIT, workload.project)


def can_manage_data_of(user: Visitor | None, project: ScopeNode) -> bool:
    """Data sources and image pull secrets of a project: admins and the department's admins."""
    return can(user, Action.MANAGE_PROJECTS, project)
def can_manage_idle_policy(user: Visitor | None) -> bool:
    """The GPU idle rule and the "held but idle" list are installation-wide: admins only."""
    return sees_everything(user, Action.MANAGE)


def can_view_unmapped_work(user: Visitor | None) -> bool:
    """Work in the cluster the portal cannot count as a project's names namespaces and objects of no project, and
    GPU pods outside the queue: admins only, who map namespaces and fix queues."""
    return sees_everything(user, Action.MANAGE)


def can_map_namespaces(user: Visitor | None) -> bool:
    """Mapping an existing namespace to a project makes all Kueue work in it that project's: admins only."""
    return sees_everything(user, Action.MANAGE)


def can_keep_alive(user: Visitor | None, workload: _Workload) -> bool:
    """Only a notebook's owner says it is still in use (idle culling is about the person at the keyboard)."""
    return bool(user is not None and user.is_authenticated and workload.owner_id == user.pk)


# --- "which rows of this kind may U see" --------------------------------------------------------------------


def _ids_with(roles_by_id: dict[int, frozenset[str]], action: Action) -> list[int]:
    return [key for key, roles in roles_by_id.items() if action in _actions(roles)]


@dataclass(frozen=True)
class ScopeAt:
    """A node of the scope tree known by its ids (a row read as plain values), to ask `can` about."""

    department_id: int
    project_id: int | None = None

    def access_scope(self) -> tuple[int, int | None]:
        return self.department_id, self.project_id


def department_ids_seen(user: Visitor | None, action: Action = Action.VIEW) -> set[int] | None:
    """The ids of the departments on which the user may do `action`, as `restrict` selects departments (a project
    binding lets its member VIEW the department); None when they may everywhere. For reads that scope several
    tables by department with a list rather than a subquery of their own each."""
    if user is None or not user.is_authenticated or not user.is_active:
        return set()
    grants = grants_for(user)
    if action in _actions(grants.everywhere):
        return None
    seen = set(_ids_with(grants.departments, action))
    if action == Action.VIEW:
        seen |= set(grants.project_departments.values())
    return seen


def restrict(queryset: Rows, user: Visitor | None, action: Action = Action.VIEW) -> Rows:
    """The rows of `queryset` on which the user may do `action`, by the scope paths the model declares."""
    if user is None or not user.is_authenticated or not user.is_active:
        return queryset.none()
    paths = queryset.model.access_paths
    grants = grants_for(user)
    if action in _actions(grants.everywhere):
        return queryset
    department_ids = _ids_with(grants.departments, action)
    condition = Q(pk__in=[])
    for path in paths.departments:
        condition |= Q(**{f"{path}__in": department_ids})
    if paths.project is not None:
        condition |= Q(**{f"{paths.project}__in": _ids_with(grants.projects, action)})
    if action == Action.VIEW and paths.member_department is not None:
        condition |= Q(**{f"{paths.member_department}__in": set(grants.project_departments.values())})
    if action == Action.VIEW and paths.owner is not None:
        condition |= Q(**{paths.owner: user})
    return queryset.filter(condition)


def role_bindings_for(user: Actor, action: Action = Action.VIEW) -> QuerySet[RoleBinding]:
    """Bindings at scopes the user may see (or manage); a user always sees their own."""
    grants = grants_for(user)
    queryset = RoleBinding.objects.all()
    if action in _actions(grants.everywhere):
        return queryset
    department_ids = _ids_with(grants.departments, action)
    project_ids = _ids_with(grants.projects, action)
    condition = Q(department_id__in=department_ids) | Q(project_id__in=project_ids) | Q(
        project__department_id__in=department_ids
    )
    if action == Action.VIEW:
        condition |= Q(pk__in=bindings_for(user).values("pk"))
    return queryset.filter(condition)


def grants_fingerprint(user: Visitor | None) -> str:
    """What the user's scope is, for cache keys and ETags of pages whose rows depend on it."""
    grants = grants_for(user)
    return f"{getattr(user, 'pk', None)}|{sorted(grants.everywhere)}|{sorted(grants.departments.items())}|" \
           f"{sorted(grants.projects.items())}"
