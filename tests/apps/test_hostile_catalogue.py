"""The hostile-input catalogue (issue 18, item 4): every form, API endpoint and query parameter fed what an attacker
or a bad day sends. Each case must answer a clear 4xx (the API in its JSON error shape; a page with its form error
shown, or a refusal message), change no row, record no intent and enqueue nothing for the cluster.

The cases are built from small tables (what to send where, and which hostile values), so a new endpoint or class
of input is one line. Ids in paths and bodies are demo ids (`{vision}`, `{pool_h100}`, ...; see
tests/api_support.demo_ids), filled in when the case runs. The test ids carry the case number and the total, e.g.
`api-017/535-node-pools-slug-nul`. A few cases are names that may exist (a username "²" is valid): those answer
200 with no rows (`empty`), which is also no 500 and no guess.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.urls import reverse

from apps.accounts.models import GroupRoleRule, PersonalAccessToken, RoleBinding
from apps.core.models import AuditEvent, Intent
from apps.org.models import Department, NodePool, PriorityClass, Project, Quota
from apps.workloads.models import Workload, WorkloadTemplate
from tests.access_matrix import fill_ids
from tests.api_support import API, demo_ids
from tests.apps.org.view_helpers import quota_payload
from tests.factories import NodePoolFactory, WorkloadFactory

# --- the classes of hostile input ---------------------------------------------------------------------------------

DEEP = "[" * 100_000 + "]" * 100_000
TEXT = {
    "nul": "a\x00b",
    "superscript-digit": "²",
    "arabic-digit": "\u0661",
    "empty": "",
    "whitespace": "   ",
    "10k-chars": "x" * 10_000,
    "xss": "<script>alert(1)</script>",
    "path-traversal": "../../etc/passwd",
    "sql": "'; DROP TABLE org_project; --",
    "csv-formula": '=HYPERLINK("http://evil.example","x")',
    "list-for-string": ["a"],
    "object-for-string": {"a": 1},
}
NUMBER = {
    "1e20": 1e20,
    "2**63": 2**63,
    "negative": -5,
    "string-for-int": "many",
    "unicode-digit": "²",
    "arabic-digit": "\u0661",  # int() and Decimal() would read it as 1
    "list-for-int": [1],
}
BAD_RESOURCE = ["nvidia.com/gpu;rm", "gpu", "kubernetes.io/gpu", "Nvidia.com/GPU ", "nvidia.com/" + "g" * 64]
RESERVED_NAMESPACES = ["kube-system", "default", "kube-public", "kube-node-lease"]
RAW_BODIES = {
    "100k-deep-json": DEEP,
    "duplicate-keys": '{"name": "a", "name": "b"}',
    "invalid-utf8": b'{"name": "\xff\xfe"}',
    "nan": '{"capacity": NaN}',
    "list-for-object": "[]",
    "string-for-object": '"x"',
    "truncated": '{"name": ',
}
QUERY = {
    "superscript-digit": "%C2%B2",
    "arabic-digit": "%D9%A1",
    "nul": "%00",
    "invalid-utf8": "%FF%FE",
    "bad-percent": "%ZZ",
    "2**63": str(2**63),
    "10k-chars": "x" * 10_000,
    "sql": "1%27%20OR%20%271%27%3D%271",
}
PAGINATION = {"limit=-5": "limit=-5", "limit=0": "limit=0", "offset=abc": "offset=abc", "limit=1e20": "limit=1e20",
              "limit-too-big": "limit=100000", "offset=2**63": f"offset={2**63}", "limit=²": "limit=%C2%B2"}


@dataclass(frozen=True)
class Case:
    """One hostile request. `api`: a JSON API call (`raw` bodies go as they are); otherwise a page, whose answer
    must show `shows` (a form error or refusal; any errorlist when empty) or be `status`."""

    name: str
    persona: str
    method: str
    path: str
    body: Any = None
    api: bool = True
    raw: bool = False
    shows: str = ""
    status: int | None = None
    follow: bool = False
    empty: bool = False  # a name that could exist but matches nothing: 200 with no rows, never a 500 or a guess
    extra: dict[str, str] = field(default_factory=dict)


CASES: list[Case] = []


def add(*cases: Case) -> None:
    CASES.extend(cases)


# --- API bodies ---------------------------------------------------------------------------------------------------

POOL = {"slug": "b300", "name": "B300", "gpu_resource": "nvidia.com/gpu", "capacity": 8,
        "node_labels": {"portal.gpu/pool": "b300"}}
DEPARTMENT = {"slug": "robotics", "name": "Robotics"}
PROJECT = {"slug": "robots", "name": "Robots", "department": "{research}"}
QUOTA = {"node_pool": "l40s-shared", "project": "{vision}", "deserved": 0, "limit": 2}
PRIORITY = {"name": "urgent", "value": 500, "preemptible": False}
BINDING = {"user": "bob", "role": "viewer", "project": "{vision}"}
TOKEN = {"name": "ci"}
SUBMIT = {"project": "vision", "name": "probe", "image": "pytorch/pytorch:2.4.0", "node_pool": "h100", "gpus": 1,
          "labels": {"model": "resnet", "data_class": "public"}}
SUBMITS = {"training": {**SUBMIT, "kind": "training"}, "batch": {**SUBMIT, "kind": "batch", "completions": 2},
           "notebook": {**SUBMIT, "kind": "notebook", "image": "jupyter/base-notebook:latest"}}


def api_fields(endpoint: str, persona: str, base: dict[str, Any], values: dict[str, dict[str, Any]],
               method: str = "POST") -> None:
    for field_name, hostile in values.items():
        for label, value in hostile.items():
            add(Case(f"{endpoint.strip('/').replace('/', '-')}-{field_name}-{label}", persona, method, endpoint,
                     {**base, field_name: value}))


api_fields("node-pools/", "admin", POOL, {"slug": TEXT, "capacity": NUMBER,
                                          "gpu_resource": {f"resource-{i}": v for i, v in enumerate(BAD_RESOURCE)}})
api_fields("node-pools/", "admin", POOL, {"node_labels": {"list-for-object": ["a"], "nul-key": {"a\x00": "b"},
                                                          "bad-key": {"bad key!": "x"}},
                                          "card_fraction_numerator": {"negative": -1}})
api_fields("departments/", "admin", DEPARTMENT, {"slug": TEXT, "min_project_weight": NUMBER})
api_fields("projects/", "deptadmin", PROJECT, {
    "slug": {k: TEXT[k] for k in ("nul", "superscript-digit", "xss", "path-traversal", "10k-chars")},
    "namespace": {ns: ns for ns in RESERVED_NAMESPACES} | {"nul": "proj-a\x00", "traversal": "../kube-system"},
    "department": {"superscript-digit": "²", "2**63": 2**63, "unseen": "{production}"}})
api_fields("quotas/", "admin", QUOTA, {"deserved": NUMBER, "project": {"arabic-digit": "\u0661", "nul": "a\x00"},
                                       "node_pool": {"nul": "h\x00", "unknown": "b999"}})
PRIORITY_VALUES = {k: v for k, v in NUMBER.items() if k != "negative"}  # Kueue priorities may be negative
api_fields("priority-classes/", "admin", PRIORITY, {"name": {k: TEXT[k] for k in (
    "nul", "empty", "xss", "10k-chars", "csv-formula")}, "value": PRIORITY_VALUES})
api_fields("role-bindings/", "admin", BINDING, {"user": {"nul": "bo\x00b", "unknown": "mallory"},
                                                "role": {"superuser": "superuser", "nul": "viewer\x00"},
                                                "project": {"superscript-digit": "²", "2**63": 2**63}})
api_fields("tokens/", "alice", TOKEN, {"name": {k: TEXT[k] for k in ("nul", "10k-chars", "object-for-string")},
                                       "expires_at": {"garbage": "soon", "past": "2001-01-01T00:00:00Z",
                                                      "far": "9999-12-31T23:59:59Z"}})
for kind, body in SUBMITS.items():
    api_fields("workloads/", "alice", body, {
        "name": {k: TEXT[k] for k in ("nul", "xss", "10k-chars", "csv-formula", "empty")},
        "project": {"superscript-digit": "²", "arabic-digit": "\u0661", "nul": "vis\x00ion", "2**63": 2**63},
        "gpus": NUMBER,
        "cpu": {"arabic-digit": "\u0661", "arabic-quantity": "\u0665\u0660\u0660m", "nan": "NaN"},
        "memory": {"arabic-digit": "\u0661Gi"},
        "image": {"bad-image": "BAD IMAGE", "nul": "busybox\x00"},
        "env": {"nul-value": {"A": "x\x00y"}, "reserved-name": {"PORTAL_TOKEN": "x"}, "list-of-strings": ["A=1"]},
        "preemtible-typo": {"unknown-field": True},
    } if kind != "notebook" else {
        "port": {"zero": 0, "too-big": 70000, "2**63": 2**63, "negative": -1, "string": "http"},
        "idle_timeout_minutes": {"zero": 0, "1e20": 1e20},
        "name": {"nul": "a\x00b"},
    })
# Unknown and read-only fields in a PATCH (and a create) are refused by name, not ignored.
for path, body in [("node-pools/{pool_h100}/", {"created_at": "2001-01-01T00:00:00Z"}),
                   ("node-pools/{pool_h100}/", {"colour": "red"}),
                   ("node-pools/{pool_h100}/", {"card_fraction": "1/2"}),
                   ("departments/{research}/", {"quotas": []}),
                   ("projects/{vision}/", {"id": 99}),
                   ("projects/{vision}/", {"quotas": [], "name": "Renamed"}),
                   ("quotas/{q_vision_h100}/", {"node_pool": "l40s-shared"}),
                   ("quotas/{q_vision_h100}/", {"deserved": 2**63}),
                   ("priority-classes/{pc_train}/", {"updated_at": "2001-01-01T00:00:00Z"}),
                   ("priority-classes/{pc_train}/", {"value": "²"}),
                   ("role-bindings/{rb_alice}/", {"scope": "everything"}),
                   ("node-pools/{pool_h100}/", {"gpu_resource": "nvidia.com/gpu;rm"})]:
    add(Case(f"patch-{path.split('/')[0]}-{next(iter(body))}", "admin", "PATCH", path, body))
add(Case("node-pools-create-read-only-id", "admin", "POST", "node-pools/", {**POOL, "id": 5}),
    Case("departments-create-unknown", "admin", "POST", "departments/", {**DEPARTMENT, "colour": "red"}))
# Bodies that are not the JSON an endpoint takes.
for label, raw in RAW_BODIES.items():
    for path, persona in [("node-pools/", "admin"), ("workloads/", "alice"), ("projects/{vision}/", "admin")]:
        add(Case(f"raw-{path.split('/')[0]}-{label}", persona, "PATCH" if "{" in path else "POST", path, raw,
                 raw=True))
add(Case("raw-quota-table-100k-deep-json", "admin", "PATCH", "departments/research/quotas/", DEEP, raw=True),
    Case("raw-quota-table-duplicate-keys", "admin", "PATCH", "departments/research/quotas/",
         '[{"node_pool": "h100", "project": "vision", "deserved": 1, "deserved": 2}]', raw=True),
    Case("quota-table-object-for-list", "admin", "PATCH", "departments/research/quotas/", {"deserved": 1}),
    Case("quota-table-row-unknown-field", "admin", "PATCH", "departments/research/quotas/",
         [{"node_pool": "h100", "project": "vision", "colour": "red"}]),
    Case("quota-table-row-2**63", "admin", "PATCH", "departments/research/quotas/",
         [{"node_pool": "h100", "project": "vision", "deserved": 2**63}]),
    Case("raw-token-sign-in-deep", "admin", "POST", "auth/token/", DEEP, raw=True),
    Case("token-sign-in-nul", "admin", "POST", "auth/token/", {"username": "admin\x00", "password": "demo"}),
    Case("token-sign-in-list", "admin", "POST", "auth/token/", {"username": ["admin"], "password": "demo"}))
# Deleting what workloads and GPU-hours still use (the fixture gives the spare pool a finished workload).
add(Case("delete-pool-in-use-by-workloads", "admin", "DELETE", "node-pools/{pool_spare}/"),
    Case("delete-pool-with-quotas", "admin", "DELETE", "node-pools/{pool_h100}/"),
    Case("delete-priority-class-in-use", "admin", "DELETE", "priority-classes/{pc_train}/"),
    Case("delete-project-in-use", "admin", "DELETE", "projects/{vision}/"),
    Case("delete-department-with-projects", "admin", "DELETE", "departments/{research}/"),
    Case("stop-finished-workload", "alice", "POST", "workloads/{finished}/stop/"),
    Case("stop-another-users-workload", "bob", "POST", "workloads/{finished}/stop/"),
    Case("bulk-stop-finished-workload", "alice", "POST", "workloads/stop/", {"ids": ["{finished}"]}),
    Case("bulk-stop-another-users-workload", "bob", "POST", "workloads/stop/", {"ids": ["{finished}"]}),
    *(Case(f"bulk-stop-ids-{label}", "alice", "POST", "workloads/stop/", {"ids": [value]})
      for label, value in NUMBER.items()))

# --- API paths and query parameters -------------------------------------------------------------------------------

for label, value in {"superscript-digit": "%C2%B2", "arabic-digit": "%D9%A1", "nul": "%00", "2**63": str(2**63),
                     "traversal": "..%2F..%2Fetc%2Fpasswd", "negative": "-1"}.items():
    for resource in ("projects", "workloads", "node-pools"):
        add(Case(f"path-{resource}-{label}", "admin", "GET", f"{resource}/{value}/"))
    add(Case(f"path-quota-table-{label}", "admin", "GET", f"departments/{value}/quotas/"))
FILTERS = {"workloads/": ["project", "status", "kind", "scope", "owner", "ordering", "q", "department"],
           "projects/": ["department", "ordering"], "quotas/": ["project", "department", "node_pool"],
           "audit-events/": ["actor", "department", "project", "since", "until", "object_id"],
           "usage/": ["project", "user", "node_pool", "start", "group_by"]}
# Free-text names (a username, an object id) may hold any letter or digit: a Unicode one matches nothing.
NAMES = {("workloads/", "owner"): ("superscript-digit", "arabic-digit", "invalid-utf8"),  # digits: an id
         ("workloads/", "q"): ("superscript-digit", "arabic-digit", "invalid-utf8", "2**63"),  # words: any text
         ("audit-events/", "actor"): ("superscript-digit", "arabic-digit", "invalid-utf8", "2**63"),
         ("audit-events/", "object_id"): ("superscript-digit", "arabic-digit", "invalid-utf8", "2**63")}
for path, params in FILTERS.items():
    for param in params:
        for label in ("superscript-digit", "arabic-digit", "nul", "invalid-utf8", "2**63"):
            query = f"{param}={QUERY[label]}" + ("&group_by=project" if path == "usage/" and param != "group_by"
                                                 else "")
            add(Case(f"query-{path.strip('/')}-{param}-{label}", "deptadmin", "GET", f"{path}?{query}",
                     empty=label in NAMES.get((path, param), ())))
for path in ("workloads/", "projects/", "quotas/", "audit-events/", "node-pools/", "role-bindings/", "tokens/"):
    for label, query in PAGINATION.items():
        add(Case(f"page-{path.strip('/')}-{label}", "admin", "GET", f"{path}?{query}"))
add(Case("query-audit-until-out-of-range", "admin", "GET", "audit-events/?until=9999-12-31"),
    Case("query-audit-since-year-0", "admin", "GET", "audit-events/?since=0000-01-01"),
    Case("query-usage-start-after-end", "admin", "GET", "usage/?group_by=project&start=2026-03-01&end=2026-01-01"),
    Case("query-usage-huge-span", "admin", "GET", "usage/?group_by=project&start=0001-01-01&end=9999-01-01"))

# --- pages --------------------------------------------------------------------------------------------------------


def page(name: str, persona: str, url_name: str, args: list[Any], data: dict[str, Any], shows: str = "",
         **kwargs: Any) -> None:
    add(Case(name, persona, "POST", f"@{url_name}|{'|'.join(str(a) for a in args)}", data, api=False, shows=shows,
             **kwargs))


QUOTA_TABLE = "quota table"  # a body key: the whole table's POST data (every cell as stored), with these changes
POOL_FORM = {"slug": "b300", "name": "B300", "description": "", "gpu_resource": "nvidia.com/gpu",
             "gpu_product": "", "cut": "full", "mig_profile": "", "replicas_per_card": "1",
             "node_labels": "portal.gpu/pool=b300", "node_taints": "", "capacity": "8", "card_fraction": "1"}
DEPARTMENT_FORM = {"slug": "robotics", "name": "Robotics", "min_project_weight": "0", "max_project_weight": "2"}
PROJECT_FORM = {"slug": "robots", "name": "Robots", "description": "", "namespace": ""}
PRIORITY_FORM = {"name": "urgent", "value": "500", "description": ""}
for label, value in {"nul": "a\x00b", "xss": TEXT["xss"], "10k-chars": TEXT["10k-chars"],
                     "superscript-digit": "²"}.items():
    page(f"form-pool-slug-{label}", "admin", "org:pool_create", [], {**POOL_FORM, "slug": value})
    page(f"form-department-slug-{label}", "admin", "org:department_create", [], {**DEPARTMENT_FORM, "slug": value})
    page(f"form-project-slug-{label}", "deptadmin", "org:project_create", ["research"],
         {**PROJECT_FORM, "slug": value})
    page(f"form-priority-class-name-{label}", "admin", "org:priority_class_create", [],
         {**PRIORITY_FORM, "name": value})
for i, value in enumerate(BAD_RESOURCE):
    page(f"form-pool-gpu-resource-{i}", "admin", "org:pool_create", [], {**POOL_FORM, "gpu_resource": value},
         shows="extended resource")
for label, value in {"1e20": "1e20", "2**63": str(2**63), "negative": "-5", "arabic-digit": "\u0661"}.items():
    page(f"form-pool-capacity-{label}", "admin", "org:pool_create", [], {**POOL_FORM, "capacity": value})
    if label != "negative":
        page(f"form-priority-class-value-{label}", "admin", "org:priority_class_create", [],
             {**PRIORITY_FORM, "value": value})
    page(f"form-department-weight-{label}", "admin", "org:department_create", [],
         {**DEPARTMENT_FORM, "max_project_weight": value})
for namespace in [*RESERVED_NAMESPACES, "proj-a\x00"]:
    page(f"form-project-namespace-{namespace.strip(chr(0))}", "deptadmin", "org:project_create", ["research"],
         {**PROJECT_FORM, "namespace": namespace})
page("form-delete-pool-in-use", "admin", "org:pool_delete", ["spare"], {}, shows="still use")
page("form-delete-priority-class-in-use", "admin", "org:priority_class_delete", ["train"], {}, shows="still use")
page("form-delete-project-in-use", "admin", "org:project_delete", ["vision"], {}, shows="still use")
for label, value in {"nul": "1\x00", "2**63": str(2**63), "negative": "-1", "superscript-digit": "²"}.items():
    page(f"form-quota-table-{label}", "admin", "org:department_quotas", ["research"],
         {QUOTA_TABLE: {("vision", "h100", "deserved"): value}})
    page(f"form-weights-{label}", "lead", "org:weights", [],  # without htmx: back to the page with the message
         {"quota": "{q_vision_h100}", "over_quota_weight": value}, shows='class="message error"', follow=True)
BINDING_FORM = {"username": "bob", "group": "", "role": "viewer", "scope": "project:{vision}"}
for label, value in {"nul": "bo\x00b", "unknown": "mallory", "xss": TEXT["xss"],
                     "10k-chars": TEXT["10k-chars"]}.items():
    page(f"form-role-binding-user-{label}", "admin", "accounts:role_binding_create", [],
         {**BINDING_FORM, "username": value})
for label, value in {"nul": "project:\x00", "unseen": "project:{forecasting}", "superscript": "project:²",
                     "garbage": "../../"}.items():
    page(f"form-role-binding-scope-{label}", "deptadmin", "accounts:role_binding_create", [],
         {**BINDING_FORM, "scope": value})
RULE_FORM = {"group_pattern": "ml-*", "role": "viewer", "scope": "everything", "description": ""}
for label, value in {"nul": "ml\x00", "empty": "", "10k-chars": TEXT["10k-chars"], "whitespace": "   "}.items():
    page(f"form-group-rule-pattern-{label}", "admin", "accounts:group_rule_create", [],
         {**RULE_FORM, "group_pattern": value})
page("form-group-rule-role-superuser", "admin", "accounts:group_rule_create", [], {**RULE_FORM, "role": "root"})
for label, data in {"name-nul": {"name": "ci\x00", "expires_on": ""}, "name-long": {"name": "x" * 10_000},
                    "expires-garbage": {"name": "ci", "expires_on": "soon"},
                    "expires-past": {"name": "ci", "expires_on": "2001-01-01"},
                    "expires-year-9999": {"name": "ci", "expires_on": "9999-12-31"}}.items():
    page(f"form-token-{label}", "alice", "accounts:tokens", [], data)
for label, data in {"username-nul": {"username": "admin\x00", "password": "demo"},
                    "username-10k": {"username": "x" * 10_000, "password": "demo"},
                    "password-nul": {"username": "admin", "password": "de\x00mo"},
                    "sql": {"username": "' OR '1'='1", "password": "' OR '1'='1"}}.items():
    add(Case(f"form-login-{label}", "", "POST", "@accounts:login|", data, api=False))
WORKLOAD_FORM: dict[str, dict[str, Any]] = {
    "training": {"project": "{vision}", "name": "probe", "image": "pytorch/pytorch:2.4.0", "node_pool": "{pool_h100}",
                 "gpus": "1", "cpu": "2", "memory_gib": "16", "priority_class": "{pc_train}", "preemptible": "on",
                 "model_label": "resnet", "data_class": "public", "pods": "1", "command": "", "args": "", "env": ""},
}
WORKLOAD_FORM["batch"] = {**WORKLOAD_FORM["training"], "completions": "2", "parallelism": "1"}
WORKLOAD_FORM["notebook"] = {**WORKLOAD_FORM["training"], "notebook_idle_timeout_minutes": "60",
                             "notebook_port": "8888"}
for kind, data in WORKLOAD_FORM.items():
    overrides = {"name-xss": {"name": TEXT["xss"]}, "name-nul": {"name": "a\x00b"},
                 "image-bad": {"image": "BAD IMAGE"}, "gpus-2**63": {"gpus": str(2**63)},
                 "gpus-arabic-digit": {"gpus": "\u0661"}, "cpu-1e20": {"cpu": "1e20"}}
    if kind != "notebook":  # a notebook's form has no command or environment
        overrides |= {"env-nul": {"env": "A=x\x00y"}, "command-bad-quotes": {"command": 'python "unclosed'}}
    for label, override in overrides.items():
        page(f"form-submit-{kind}-{label}", "alice", "workloads:submit", [kind], {**data, **override})
    # A project the user may not see (or that is no id) is a 404, as for every row out of sight.
    for label, project in {"arabic-digit": "\u0661", "unseen": "{forecasting}"}.items():
        page(f"form-submit-{kind}-project-{label}", "alice", "workloads:submit", [kind], {**data, "project": project},
             status=404)
    if kind == "notebook":
        for label, port in {"zero": "0", "too-big": "70000", "negative": "-1"}.items():
            page(f"form-submit-notebook-port-{label}", "alice", "workloads:submit", [kind],
                 {**data, "notebook_port": port})
TEMPLATE_FORM = {"name": "probe", "description": "", "kind": "training"}
for label, values in {"deep-json": DEEP, "bad-image": '{"image": "BAD IMAGE"}', "nul": '{"image": "a\\u0000"}',
                      "list-for-object": "[]", "duplicate-keys": '{"gpus": 1, "gpus": 1000}',
                      "string-for-int": '{"gpus": "many"}', "unknown-field": '{"project": "vision"}'}.items():
    page(f"form-template-{label}", "admin", "workloads:template_create", [], {**TEMPLATE_FORM, "values": values})
page("form-stop-finished", "alice", "workloads:stop", ["{finished}"], {}, shows="nothing to stop", follow=True)
page("form-stop-others", "bob", "workloads:stop", ["{finished}"], {}, status=404)
page("form-bulk-stop-others", "bob", "workloads:bulk_stop", [], {"ids": "{finished}", "confirmed": "1"}, status=404)
page("form-bulk-stop-finished", "alice", "workloads:bulk_stop", [], {"ids": "{finished}", "confirmed": "1"},
     shows="Nothing to stop", follow=True)
page("form-bulk-stop-nul", "alice", "workloads:bulk_stop", [], {"ids": "1\x00", "confirmed": "1"},
     shows="Tick the workloads to stop first", follow=True)
page("form-keep-alive-training", "alice", "workloads:keep_alive", ["{finished}"], {}, status=404)
# Page filters (GET): a list, the audit log, the reports and the card holders.
PAGE_FILTERS = {"workloads:list": ["project", "status", "ordering", "department"],
                "org:audit": ["until", "department"],
                "usage:reports": ["project", "user", "month", "start"], "usage:holders": ["project", "user", "start"],
                "usage:reports_csv": ["project", "month"]}
for url_name, params in PAGE_FILTERS.items():
    for param in params:
        for label in ("superscript-digit", "nul", "invalid-utf8"):
            csv_export = url_name.endswith("_csv")
            add(Case(f"filter-{url_name.replace(':', '-')}-{param}-{label}", "deptadmin", "GET",
                     f"@{url_name}|?{param}={QUERY[label]}", api=False, status=400 if csv_export else None))
# Search words may be any text (a Unicode digit is a word); NUL is refused, and the CSV of a bad filter is a 400.
add(Case("filter-workloads-list-q-nul", "deptadmin", "GET", f"@workloads:list|?q={QUERY['nul']}", api=False),
    *(Case(f"filter-workloads-export-{param}-nul", "deptadmin", "GET", f"@workloads:export|?{param}={QUERY['nul']}",
           api=False, status=400) for param in ("q", "project", "department", "status")))
for label, query in {"submit-project-nul": "project=%00", "submit-template-2**63": f"template={2**63}",
                     "submit-from-superscript": "from=%C2%B2"}.items():
    add(Case(f"filter-{label}", "alice", "GET", f"@workloads:submit|training?{query}", api=False, status=404))

TOTAL = len(CASES)


def case_id(index: int, case: Case) -> str:
    return f"{'api' if case.api else 'page'}-{index + 1:03d}/{TOTAL}-{re.sub(r'[^A-Za-z0-9*_-]+', '_', case.name)}"


# --- running a case -----------------------------------------------------------------------------------------------

MODELS = [NodePool, Department, Project, Quota, PriorityClass, RoleBinding, GroupRoleRule, PersonalAccessToken,
          Workload, WorkloadTemplate, Intent]


def snapshot() -> dict[str, Any]:
    """Every row a refused request could change (audit rows and intents counted), but timestamps a read bumps."""
    state: dict[str, Any] = {"audit": AuditEvent.objects.count()}
    for model in MODELS:
        names = [f.attname for f in model._meta.concrete_fields if f.name != "last_used_at"]
        state[model.__name__] = list(model.objects.order_by("pk").values_list(*names))
    return state


@pytest.fixture
def ids(demo):
    """The demo ids, plus a pool without quotas and a finished workload that the pool and `train` refer to."""
    spare = NodePoolFactory(slug="spare")
    finished = WorkloadFactory(project=Project.objects.get(slug="vision"), owner=demo["alice"], node_pool=spare,
                               priority_class=PriorityClass.objects.get(name="train"), status="succeeded")
    return {**demo_ids(), "pool_spare": spare.pk, "finished": finished.pk}


def resolve(case: Case, ids: dict[str, int]) -> str:
    path = re.sub(r"\{(\w+)\}", lambda m: str(ids[m[1]]), case.path)
    if not path.startswith("@"):
        return API + path
    url_name, _, rest = path[1:].partition("|")
    args, _, query = rest.partition("?")
    return reverse(url_name, args=[a for a in args.split("|") if a]) + (f"?{query}" if query else "")


def send(client: Any, case: Case, url: str, ids: dict[str, int]) -> Any:
    method = getattr(client, case.method.lower())
    if case.api:
        if case.method in ("GET", "DELETE") and case.body is None:
            return method(url)
        body = case.body if case.raw else json.dumps(fill_ids(case.body, ids))
        return method(url, data=body, content_type="application/json")
    if QUOTA_TABLE in (case.body or {}):
        changes = {(Project.objects.get(slug=owner), pool, part): value
                   for (owner, pool, part), value in case.body[QUOTA_TABLE].items()}
        return method(url, quota_payload(Department.objects.get(slug="research"), changes))
    data = {re.sub(r"\{(\w+)\}", lambda m: str(ids[m[1]]), k): fill_ids(v, ids) if not isinstance(v, str) else
            re.sub(r"\{(\w+)\}", lambda m: str(ids[m[1]]), v) for k, v in (case.body or {}).items()}
    if case.method == "GET":
        return method(url, follow=case.follow)
    return method(url, data, follow=case.follow)


def assert_matches_nothing(response: Any, case: Case) -> None:
    assert response.status_code == 200, (response.status_code, response.content[:300])
    if case.api:
        assert response.json()["count"] == 0


def assert_api_error(response: Any) -> None:
    assert 400 <= response.status_code < 500, (response.status_code, response.content[:300])
    assert response["Content-Type"].startswith("application/json"), response["Content-Type"]
    body = response.json()
    assert isinstance(body, dict) and body, body
    if "detail" not in body:  # the validation shape: field -> messages (nested by row or field)
        assert all(isinstance(messages, list | dict) for messages in body.values()), body


def assert_page_error(response: Any, case: Case) -> None:
    content = response.content.decode(errors="replace")
    if case.status is not None:
        assert response.status_code == case.status, (response.status_code, content[:300])
        return
    assert response.status_code in (200, 400), (response.status_code, content[:300])
    if case.shows:
        assert case.shows in content, case.shows
    else:
        assert 'class="errorlist' in content or "cell-error" in content, "no error shown"


@pytest.mark.parametrize("case", [pytest.param(case, id=case_id(i, case)) for i, case in enumerate(CASES)])
def test_hostile_input_is_refused_with_a_clear_4xx_and_changes_nothing(case, ids, client, client_for,
                                                                       django_capture_on_commit_callbacks):
    signed_in = client_for(case.persona) if case.persona else client
    url = resolve(case, ids)
    before = snapshot()
    with django_capture_on_commit_callbacks() as callbacks:
        response = send(signed_in, case, url, ids)
    if case.empty:
        assert_matches_nothing(response, case)
    elif case.api:
        assert_api_error(response)
    else:
        assert_page_error(response, case)
    assert snapshot() == before, "a refused request changed a row, an audit entry or an intent"
    assert callbacks == [], "a refused request enqueued work for the cluster"


def test_the_catalogue_holds_at_least_150_cases():
    assert TOTAL >= 150
