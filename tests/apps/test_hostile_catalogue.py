"""The hostile-input catalogue: every form, API endpoint and query parameter fed what an attacker
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
from django.test import Client
from django.urls import reverse

from apps.accounts.models import GroupRoleRule, NotificationPreference, PersonalAccessToken, RoleBinding
from apps.accounts.services import personal_token_create
from apps.core.models import AuditEvent, Intent
from apps.org.demo import DEMO_PASSWORD
from apps.org.models import Budget, DataSource, Department, ImagePullSecret, NodePool, PriorityClass, Project, Quota
from apps.workloads.models import Credential, IdlePolicy, Workload, WorkloadEvent, WorkloadTemplate
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
    "3mb-json": '{"name": "' + "x" * 3_000_000 + '"}',  # past DATA_UPLOAD_MAX_MEMORY_SIZE
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
    """One hostile request. `api`: a JSON API call (`raw` bodies go as they are), a 4xx in the API's error shape
    (exactly `status` when given); otherwise a page, whose answer must show `shows` (a form error or refusal; any
    errorlist when empty) or be `status`."""

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
    csrf: bool = False  # sent by a session client that enforces CSRF, without the token
    extra: dict[str, str] = field(default_factory=dict)


CASES: list[Case] = []


def add(*cases: Case) -> None:
    CASES.extend(cases)


# --- API bodies ---------------------------------------------------------------------------------------------------

POOL = {"slug": "b300", "name": "B300", "gpu_resource": "nvidia.com/gpu", "capacity": 8,
        "node_labels": {"portal.gpu/pool": "b300"}}
DEPARTMENT = {"slug": "robotics", "name": "Robotics"}
PROJECT = {"slug": "robots", "name": "Robots", "department": "{research}"}
QUOTA = {"node_pool": "spare", "project": "{vision}", "deserved": 0, "limit": 2}  # vision has none on spare
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
# References by id take a JSON integer or ASCII digits: int() would read U+0661, 1.5 and true as row 1.
for label, value in {"arabic-digit": "\u0661", "float": 1.0, "bool": True, "list": ["{vision}"], "zero": 0}.items():
    add(Case(f"role-bindings-project-ref-{label}", "admin", "POST", "role-bindings/", {**BINDING, "project": value}),
        Case(f"quotas-project-ref-{label}", "admin", "POST", "quotas/", {**QUOTA, "project": value}),
        Case(f"projects-department-ref-{label}", "deptadmin", "POST", "projects/", {**PROJECT, "department": value}),
        Case(f"patch-projects-department-ref-{label}", "admin", "PATCH", "projects/{vision}/", {"department": value}))
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
             "node_labels": "portal.gpu/pool=b300", "node_taints": "", "capacity": "8", "card_fraction": "1",
             "scheduler": "kueue"}
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
         {"quota": "{q_vision_h100}", "over_quota_weight": value, "version": "{v_q_vision_h100}"},
         shows='class="message error"', follow=True)
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
                 "model_label": "resnet", "data_class": "public", "pods": "1", "command": "", "args": "", "env": "",
                 # a valid token, so each case is refused for its hostile field, not for a missing token
                 "submission_token": "hostile-catalogue-token"},
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
# The inference service form: the demo holds no serving reservation, so every case is refused for its field too.
INFERENCE_FORM = {"project": "{vision}", "name": "llama", "image": "vllm/vllm-openai:v0.6.3", "command": "",
                  "args": "", "node_pool": "{pool_h100}", "serving_port": "8000", "gpus": "1", "replicas": "1",
                  "model_label": "llama", "data_class": "public"}
for label, override in {"gpus-2**63": {"gpus": str(2**63)}, "replicas-arabic-digit": {"replicas": "\u0661"},
                        "port-nul": {"serving_port": "80\x00"}, "command-bad-quotes": {"command": 'vllm "serve'},
                        "name-xss": {"name": TEXT["xss"]}, "image-nul": {"image": "a\x00b"}}.items():
    page(f"form-inference-{label}", "alice", "workloads:submit_inference", [], {**INFERENCE_FORM, **override})
page("form-inference-unseen-project", "alice", "workloads:submit_inference", [],
     {**INFERENCE_FORM, "project": "{forecasting}"}, status=404)
page("form-inference-update-not-a-service", "alice", "workloads:inference_update", ["{finished}"],
     {"replicas": "2", "image": "busybox"}, status=404)
page("form-inference-update-others", "bob", "workloads:inference_update", ["{finished}"],
     {"replicas": "2", "image": "busybox"}, status=404)
TEMPLATE_FORM = {"name": "probe", "description": "", "kind": "training"}
for label, values in {"deep-json": DEEP, "bad-image": '{"image": "BAD IMAGE"}', "nul": '{"image": "a\\u0000"}',
                      "list-for-object": "[]", "duplicate-keys": '{"gpus": 1, "gpus": 1000}',
                      "string-for-int": '{"gpus": "many"}', "unknown-field": '{"project": "vision"}'}.items():
    page(f"form-template-{label}", "admin", "workloads:template_create", [], {**TEMPLATE_FORM, "values": values})
page("form-stop-finished", "alice", "workloads:stop", ["{finished}"], {}, shows="nothing to stop", follow=True)
BUDGET_FORM = {"department": "", "project": "{vision}", "period": "month", "metric": "gpu_hours", "amount": "100",
               "thresholds": "50, 80, 100", "on_exceed": "notify"}
for label, value in {"nul": "1\x00", "1e20": "1e20", "2**63": str(2**63), "negative": "-1",
                     "arabic-digit": "\u0661"}.items():
    page(f"form-budget-amount-{label}", "lead", "usage:budget_create", [], {**BUDGET_FORM, "amount": value})
for label, value in {"nul": "50\x00", "xss": TEXT["xss"], "10k-chars": TEXT["10k-chars"], "superscript-digit": "²",
                     "zero": "0, 50", "unsorted": "80, 50", "twice": "50, 50", "eleven": ", ".join(map(str, range(
                         1, 12)))}.items():
    page(f"form-budget-thresholds-{label}", "lead", "usage:budget_create", [], {**BUDGET_FORM, "thresholds": value})
page("form-budget-period-unknown", "lead", "usage:budget_create", [], {**BUDGET_FORM, "period": "week"})
page("form-budget-unseen-project", "lead", "usage:budget_create", [], {**BUDGET_FORM, "project": "{forecasting}"})
page("form-budget-department-as-lead", "lead", "usage:budget_create", [],
     {**BUDGET_FORM, "project": "", "department": "{research}"})
page("form-budget-as-researcher", "alice", "usage:budget_create", [], BUDGET_FORM, status=403)
page("form-stop-others", "bob", "workloads:stop", ["{finished}"], {}, status=404)
POLICY_FORM = {"department": "", "project": "{vision}", "max_gpus_per_workload": "2", "allowed_images": "nvcr.io/*"}
for label, value in {"regex-catastrophic": "(a+)+$", "nul": "nvcr.io/\x00", "xss": TEXT["xss"],
                     "10k-chars": TEXT["10k-chars"], "many-lines": "\n".join(f"r{n}/*" for n in range(60))}.items():
    page(f"form-policy-images-{label}", "deptadmin", "workloads:policy_create", [],
         {**POLICY_FORM, "allowed_images": value})
    page(f"form-policy-preview-images-{label}", "deptadmin", "workloads:policy_create", [],
         {**POLICY_FORM, "allowed_images": value, "_preview": "1"})
for label, value in {"2**63": str(2**63), "negative": "-1", "zero": "0", "arabic-digit": "\u0661"}.items():
    page(f"form-policy-gpus-{label}", "deptadmin", "workloads:policy_create", [],
         {**POLICY_FORM, "max_gpus_per_workload": value})
page("form-policy-unknown-class", "deptadmin", "workloads:policy_create", [],
     {**POLICY_FORM, "allowed_priority_classes": "no-such-class"})
page("form-policy-unseen-project", "deptadmin", "workloads:policy_create", [],
     {**POLICY_FORM, "project": "{forecasting}"})
page("form-policy-organisation-as-department-admin", "deptadmin", "workloads:policy_create", [],
     {**POLICY_FORM, "project": ""})
page("form-policy-as-researcher", "alice", "workloads:policy_create", [], POLICY_FORM, status=403)
CHANNEL_FORM = {"project": "{vision}", "name": "probe", "kind": "webhook", "email": "", "url": "http://127.0.0.1:9/hook",
                "secret": "a-secret-of-enough-length", "events": "workload.finished", "enabled": "on"}
for label, value in {"nul": "http://127.0.0.1:9/\x00", "credentials": "http://user:pw@127.0.0.1:9/hook",
                     "ftp": "ftp://127.0.0.1/hook", "javascript": "javascript:alert(1)", "xss": TEXT["xss"],
                     "10k-chars": TEXT["10k-chars"], "empty": ""}.items():
    page(f"form-channel-url-{label}", "lead", "org:notification_channel_create", [], {**CHANNEL_FORM, "url": value})
for label, value in {"short": "short", "nul": "a-secret-of-enough\x00", "10k-chars": TEXT["10k-chars"]}.items():
    page(f"form-channel-secret-{label}", "lead", "org:notification_channel_create", [],
         {**CHANNEL_FORM, "secret": value})
page("form-channel-event-unknown", "lead", "org:notification_channel_create", [], {**CHANNEL_FORM, "events": "test"})
page("form-channel-kind-unknown", "lead", "org:notification_channel_create", [], {**CHANNEL_FORM, "kind": "pigeon"})
page("form-channel-name-10k", "lead", "org:notification_channel_create", [], {**CHANNEL_FORM, "name": "x" * 10_000})
page("form-channel-unseen-project", "lead", "org:notification_channel_create", [],
     {**CHANNEL_FORM, "project": "{forecasting}"})
page("form-channel-project-as-researcher", "alice", "org:notification_channel_create", [], CHANNEL_FORM)
page("form-bulk-stop-others", "bob", "workloads:bulk_stop", [], {"ids": "{finished}", "confirmed": "1"}, status=404)
page("form-bulk-stop-finished", "alice", "workloads:bulk_stop", [], {"ids": "{finished}", "confirmed": "1"},
     shows="Nothing to stop", follow=True)
page("form-bulk-stop-nul", "alice", "workloads:bulk_stop", [], {"ids": "1\x00", "confirmed": "1"},
     shows="Tick the workloads to stop first", follow=True)
page("form-keep-alive-training", "alice", "workloads:keep_alive", ["{finished}"], {}, status=404)
# Page filters (GET): a list, the audit log, the reports and the card holders.
PAGE_FILTERS = {"workloads:list": ["project", "status", "ordering", "department"],
                "org:audit": ["until", "department"],
                "org:notification_channels": ["project", "kind"],
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

# --- the coverage audit: endpoints and parameters the tables above did not reach -------------------------------------

# Ids in paths, on every resource and workload action; a POST action takes an empty body.
for label, value in {"superscript-digit": "%C2%B2", "arabic-digit": "%D9%A1", "nul": "%00", "2**63": str(2**63),
                     "negative": "-1", "float": "1.5"}.items():
    for resource in ("role-bindings", "tokens", "templates", "audit-events", "priority-classes", "quotas",
                     "departments"):
        add(Case(f"path-{resource}-{label}", "admin", "GET", f"{resource}/{value}/"))
    add(Case(f"path-workload-logs-{label}", "alice", "GET", f"workloads/{value}/logs/"))
    for action in ("stop", "keep-alive", "resubmit"):
        add(Case(f"path-workload-{action}-{label}", "alice", "POST", f"workloads/{value}/{action}/", {}))
# A row the user may not see is not found, whatever is asked of it (never 403: that would confirm it exists).
add(Case("unseen-workload-logs", "bob", "GET", "workloads/{finished}/logs/", status=404),
    Case("unseen-workload-resubmit", "bob", "POST", "workloads/{finished}/resubmit/", {}, status=404),
    Case("unseen-workload-keep-alive", "bob", "POST", "workloads/{finished}/keep-alive/", {}, status=404),
    Case("unseen-workload-detail", "carol", "GET", "workloads/{finished}/", status=404),
    Case("unseen-token-detail", "alice", "GET", "tokens/{token_bob}/", status=404),
    Case("unseen-token-revoke", "alice", "DELETE", "tokens/{token_bob}/", status=404),
    Case("unseen-role-binding-delete", "deptadmin", "DELETE", "role-bindings/{rb_carol}/", status=404),
    Case("unseen-project-patch", "deptadmin", "PATCH", "projects/{forecasting}/", {"name": "x"}, status=404),
    Case("unseen-quota-patch", "deptadmin", "PATCH", "quotas/{q_forecasting_h100}/", {"deserved": 1}, status=404),
    Case("unseen-department-quota-table", "deptadmin", "PATCH", "departments/production/quotas/",
         [{"node_pool": "h100", "project": "serving", "deserved": 1}], status=404),
    Case("unseen-resubmit-into-project", "alice", "POST", "workloads/{resubmittable}/resubmit/",
         {"project": "forecasting"}),
    Case("keep-alive-not-a-notebook", "alice", "POST", "workloads/{finished}/keep-alive/", {}))
# The logs' query parameters.
for param in ("lines", "timeout"):
    for label, value in {"superscript-digit": "%C2%B2", "nul": "%00", "2**63": str(2**63), "negative": "-1",
                         "zero": "0", "float": "1.5", "nan": "NaN", "too-many": "100000"}.items():
        add(Case(f"query-logs-{param}-{label}", "alice", "GET", f"workloads/{{finished}}/logs/?{param}={value}"))
for label, value in {"yes": "yes", "nul": "%00", "empty": "", "2": "2"}.items():
    add(Case(f"query-logs-follow-{label}", "alice", "GET", f"workloads/{{finished}}/logs/?follow={value}"))
# A pool's cut decides its profile and replicas: the API must not store ones the cut does not use.
for label, body in {"mig-without-profile": {"cut": "mig", "gpu_resource": "nvidia.com/mig-3g.40gb"},
                    "mig-profile-template": {"cut": "mig", "mig_profile": "3g.{{7*7}}"},
                    "mig-profile-nul": {"cut": "mig", "mig_profile": "3g.40gb\x00"},
                    "full-with-profile": {"mig_profile": "3g.40gb"},
                    "time-sliced-one-replica": {"cut": "time-sliced", "replicas_per_card": 1},
                    "full-with-replicas": {"replicas_per_card": 4}, "cut-unknown": {"cut": "half"}}.items():
    add(Case(f"node-pools-{label}", "admin", "POST", "node-pools/", {**POOL, **body}))
add(Case("patch-node-pools-profile-on-full-pool", "admin", "PATCH", "node-pools/{pool_h100}/",
         {"mig_profile": "<script>"}),
    Case("patch-node-pools-replicas-on-full-pool", "admin", "PATCH", "node-pools/{pool_h100}/",
         {"replicas_per_card": 8}),
    Case("patch-node-pools-cut-mig-without-profile", "admin", "PATCH", "node-pools/{pool_h100}/", {"cut": "mig"}))
page("form-pool-mig-profile-template", "admin", "org:pool_create", [],
     {**POOL_FORM, "cut": "mig", "mig_profile": "{{7*7}}"}, shows="MIG profile such as")
# Templates (admins): every field's type, and values the submit form would refuse.
TEMPLATE = {"name": "probe", "description": "", "kind": "training", "values": {"gpus": 1}}
api_fields("templates/", "admin", TEMPLATE, {
    "name": {"nul": "a\x00b", "empty": "", "10k-chars": TEXT["10k-chars"], "list-for-string": ["a"],
             "object-for-string": {"a": 1}, "int-for-string": 5, "bool-for-string": True, "null": None},
    "description": {"list-for-string": ["a"], "int-for-string": 2**63, "10k-chars": TEXT["10k-chars"]},
    "kind": {"unknown": "serving", "list": ["training"], "nul": "training\x00"},
    "values": {"list-for-object": [], "string-for-object": "gpus=1", "unknown-field": {"project": "vision"},
               "gpus-2**63": {"gpus": 2**63}, "gpus-string": {"gpus": "many"}, "image-bad": {"image": "BAD IMAGE"},
               "nul": {"image": "a\x00"}, "pool-unknown": {"node_pool": "b999"},
               "data-sources-not-list": {"data_sources": "imagenet"}},
})
add(Case("templates-unknown-field", "admin", "POST", "templates/", {**TEMPLATE, "colour": "red"}),
    Case("templates-create-as-researcher", "alice", "POST", "templates/", TEMPLATE, status=403))
for label, raw in RAW_BODIES.items():
    add(Case(f"raw-templates-{label}", "admin", "POST", "templates/", raw, raw=True))
# Resubmit: the body changes the source's request and is checked like a submission.
for label, body in {"gpus-2**63": {"gpus": 2**63}, "gpus-arabic-digit": {"gpus": "\u0661"},
                    "kind-unknown": {"kind": "serving"}, "unknown-field": {"colour": "red"},
                    "name-nul": {"name": "a\x00b"}, "project-2**63": {"project": 2**63},
                    "resubmitted-from-unseen": {"resubmitted_from": "{bob_finished}"},
                    "labels-list": {"labels": ["resnet"]}, "node-pool-list": {"node_pool": ["h100"]}}.items():
    add(Case(f"resubmit-{label}", "alice", "POST", "workloads/{resubmittable}/resubmit/", body))
for label, raw in {"list": "[]", "string": '"x"', "number": "5", "100k-deep-json": DEEP,
                   "invalid-utf8": b'{"name": "\xff"}'}.items():
    add(Case(f"raw-resubmit-{label}", "alice", "POST", "workloads/{resubmittable}/resubmit/", raw, raw=True))
# Submissions: fields of another kind are refused, not silently dropped; references of every kind checked.
for label, body in {"training-completions-2**63": {"completions": 2**63}, "training-parallelism-negative":
                    {"parallelism": -1}, "training-port": {"port": 8888},
                    "training-idle-timeout": {"idle_timeout_minutes": 5}}.items():
    add(Case(f"workloads-{label}", "alice", "POST", "workloads/", {**SUBMITS["training"], **body}))
add(Case("workloads-batch-pods", "alice", "POST", "workloads/", {**SUBMITS["batch"], "pods": 4}),
    Case("workloads-notebook-completions", "alice", "POST", "workloads/", {**SUBMITS["notebook"], "completions": 3}))
api_fields("workloads/", "alice", SUBMITS["training"], {
    "kind": {"unknown": "serving", "list": ["training"], "nul": "train\x00"},
    "node_pool": {"list": ["h100"], "unknown": "b999", "2**63": 2**63},
    "priority_class": {"unknown": "urgent", "nul": "train\x00", "object": {"name": "train"}},
    "preemptible": {"string": "maybe", "list": [True]},
    "max_runtime_seconds": {"negative": -1, "2**63": 2**63, "string": "long", "arabic-digit": "\u0661"},
    "shm": {"nan": "NaN", "infinity": "Infinity", "negative": "-1", "arabic-digit": "\u0661"},
    "data_sources": {"string-for-list": "imagenet", "unknown": ["imagenet"], "nul": ["a\x00"]},
    "credentials": {"string-for-list": "wandb", "unknown": ["wandb"], "object": [{"name": "wandb"}]},
    "labels": {"list-for-object": ["resnet"], "model-nul": {"model": "a\x00", "data_class": "public"},
               "data-class-bad-label": {"model": "resnet", "data_class": "top secret!"}},
    "command": {"string-for-list": "python train.py", "nul": ["python\x00"], "object": [{"a": 1}]},
    "resubmitted_from": {"unseen": "{bob_finished}", "2**63": 2**63, "string": "last"},
    "pods": {"2**63": 2**63, "zero": 0},
})
# Text must arrive as text: a JSON number (or true) where a name, slug or label goes is refused, not saved as digits.
NUMBER_FOR_TEXT = {"int-for-string": 5, "2**63-for-string": 2**63, "float-for-string": 1.5, "bool-for-string": True}
api_fields("workloads/", "alice", SUBMITS["training"], {
    "name": NUMBER_FOR_TEXT, "image": NUMBER_FOR_TEXT,
    "labels": {f"model-{k}": {"model": v, "data_class": "public"} for k, v in NUMBER_FOR_TEXT.items()},
    "command": {f"item-{k}": ["python", v] for k, v in NUMBER_FOR_TEXT.items()},
    "data_sources": {"item-int-for-string": [5]}})
api_fields("node-pools/", "admin", POOL, {"name": NUMBER_FOR_TEXT, "slug": {"int-for-string": 5},
                                          "node_labels": {"int-value": {"portal.gpu/pool": 5}}})
api_fields("departments/", "admin", DEPARTMENT, {"name": NUMBER_FOR_TEXT})
api_fields("projects/", "deptadmin", PROJECT, {"name": NUMBER_FOR_TEXT})
api_fields("tokens/", "alice", TOKEN, {"name": NUMBER_FOR_TEXT})
# Bulk stop: the ids' shape.
for label, ids_value in {"string-for-list": "1", "object-for-list": {"a": 1}, "null": None, "empty-list": [],
                         "nested-list": [[1]], "nul": ["1\x00"]}.items():
    add(Case(f"bulk-stop-ids-{label}", "alice", "POST", "workloads/stop/", {"ids": ids_value}))
add(Case("bulk-stop-unknown-field", "alice", "POST", "workloads/stop/", {"ids": ["{finished}"], "all": True}))
# Query parameters of the API lists and reports the tables above did not reach.
API_FILTERS = {"workloads/export/": ["status", "kind", "ordering", "scope", "owner", "project", "q"],
               "audit-events/": ["object_type", "ordering", "action", "until"],
               "usage/csv/": ["group_by", "start", "end", "department", "project", "user", "node_pool"],
               "usage/": ["end", "department"]}
for path, params in API_FILTERS.items():
    for param in params:
        for label in ("superscript-digit", "nul", "invalid-utf8", "2**63", "10k-chars"):
            if param in ("q", "owner", "user", "action") and label != "nul" and label != "10k-chars":
                continue  # free text or a name: any other letter matches nothing (covered above)
            base = "group_by=project&start=2026-01-01&end=2026-02-01&" if path.startswith("usage/") else ""
            query = base.replace(f"{param}=", "x_=") + f"{param}={QUERY[label]}"
            add(Case(f"query-{path.strip('/').replace('/', '-')}-{param}-{label}", "deptadmin", "GET",
                     f"{path}?{query}"))
for path, query in {"workloads/": "ordering=password", "workloads/export/": "ordering=-owner__password",
                    "audit-events/": "ordering=before", "projects/": "ordering=namespace",
                    "quotas/": "ordering=project__department__name"}.items():
    add(Case(f"query-{path.strip('/').replace('/', '-')}-unknown-ordering", "admin", "GET", f"{path}?{query}"))
add(Case("query-usage-timezone-offset-out-of-range", "admin", "GET",
         "usage/?group_by=project&start=2026-01-01T00:00:00%2B99:00&end=2026-02-01"),
    Case("query-usage-start-invalid-day", "admin", "GET", "usage/?group_by=project&start=2026-02-30&end=2026-03-01"),
    Case("query-usage-group-by-duplicate", "admin", "GET",
         "usage/?group_by=project&group_by=password&start=2026-01-01&end=2026-02-01"),
    Case("query-usage-unseen-project", "alice", "GET",
         "usage/?group_by=project&project=forecasting&start=2026-01-01&end=2026-02-01"),
    Case("query-workloads-unseen-project", "alice", "GET", "workloads/?project=forecasting"),
    # A CSV is no page, but a reference out of sight is refused there too, not answered with an empty file.
    Case("query-workloads-export-unseen-project", "alice", "GET", "workloads/export/?project=forecasting"),
    Case("query-workloads-export-unknown-department", "alice", "GET", "workloads/export/?department=nowhere"),
    Case("filter-workloads-export-unseen-project", "alice", "GET", "@workloads:export|?project=forecasting",
         api=False, status=400),
    Case("filter-workloads-export-unknown-department", "alice", "GET", "@workloads:export|?department=-1",
         api=False, status=400),
    Case("query-workloads-status-unknown", "alice", "GET", "workloads/?status=running,hacked"),
    Case("query-audit-since-after-until", "admin", "GET", "audit-events/?since=2026-02-01&until=2026-01-01"),
    # A parameter given twice: the last one counts, and is checked like any other.
    Case("query-workloads-duplicate-project", "alice", "GET", "workloads/?project=vision&project=forecasting"),
    Case("query-workloads-duplicate-ordering", "alice", "GET", "workloads/?ordering=name&ordering=password"),
    Case("query-workloads-duplicate-limit", "alice", "GET", "workloads/?limit=10&limit=-1"),
    Case("query-usage-end-invalid-time", "admin", "GET",
         "usage/?group_by=project&start=2026-01-01&end=2026-01-02T25:00"),
    Case("filter-holders-start-invalid-time", "deptadmin", "GET", "@usage:holders|?start=2026-01-01T25:61",
         api=False),
    Case("filter-holders-end-before-start", "deptadmin", "GET",
         "@usage:holders|?start=2026-01-02T00:00&end=2026-01-01T00:00", api=False),
    Case("filter-holders-span-too-long", "deptadmin", "GET",
         "@usage:holders|?start=2000-01-01T00:00&end=2026-01-01T00:00", api=False),
    Case("filter-reports-month-13", "deptadmin", "GET", "@usage:reports|?month=2026-13", api=False),
    Case("filter-reports-month-year-0", "deptadmin", "GET", "@usage:reports|?month=0000-01", api=False),
    Case("filter-audit-since-year-10000", "admin", "GET", "@org:audit|?since=10000-01-01", api=False))
# The edges of what a date can hold: month arithmetic and time zones must not overflow into a 500.
for label, query in {"month-9999-12": "month=9999-12", "month-0001-01": "month=0001-01",
                     "end-9999-12-31": "start=9999-12-01&end=9999-12-31", "start-0001-01-01":
                     "start=0001-01-01&end=0001-01-31"}.items():
    add(Case(f"filter-reports-{label}", "deptadmin", "GET", f"@usage:reports|?{query}", api=False))
    add(Case(f"filter-reports-csv-{label}", "deptadmin", "GET", f"@usage:reports_csv|?{query}", api=False,
             status=400))
for label, query in {"end-9999-12-31": "end=9999-12-31T23:59", "end-0001-01-01": "end=0001-01-01T00:00",
                     "start-0001-01-01": "start=0001-01-01T00:00"}.items():
    add(Case(f"filter-holders-{label}", "deptadmin", "GET", f"@usage:holders|?{query}", api=False),
        Case(f"filter-holders-csv-{label}", "deptadmin", "GET", f"@usage:holders_csv|?{query}", api=False,
             status=400))
for label, query in {"month-9999-12": "group_by=month&start=9999-12-01&end=9999-12-31T23:59",
                     "year-1": "group_by=month&start=0001-01-01&end=0001-02-01",
                     "end-year-10000": "group_by=project&start=9999-12-01&end=10000-01-01"}.items():
    add(Case(f"query-usage-{label}", "admin", "GET", f"usage/?{query}"),
        Case(f"query-usage-csv-{label}", "admin", "GET", f"usage/csv/?{query}"))
# Session writes without the CSRF token are refused (403) and change nothing.
add(Case("csrf-api-node-pool-create", "admin", "POST", "node-pools/", POOL, status=403, csrf=True),
    Case("csrf-api-workload-submit", "alice", "POST", "workloads/", SUBMIT | {"kind": "training"}, status=403,
         csrf=True),
    Case("csrf-api-bulk-stop", "alice", "POST", "workloads/stop/", {"ids": ["{live}"]}, status=403, csrf=True),
    Case("csrf-api-token-create", "alice", "POST", "tokens/", TOKEN, status=403, csrf=True))

# Pages: the forms the tables above did not reach.
SOURCE_FORM = {"form": "data_source", "source-project": "{vision}", "source-name": "imagenet", "source-kind": "nfs",
               "source-claim_name": "", "source-nfs_server": "nfs.example.org", "source-nfs_path": "/exports/x",
               "source-mount_path": "/data/x", "source-description": ""}
SECRET_FORM = {"form": "pull_secret", "registry-project": "{vision}", "registry-name": "nvcr",
               "registry-registry": "nvcr.io", "registry-username": "u", "registry-password": "p"}
for label, override in {"project-arabic-digit": {"source-project": "\u0661"},
                        "project-unseen": {"source-project": "{forecasting}"},
                        "project-nul": {"source-project": "1\x00"},
                        "name-nul": {"source-name": "a\x00b"}, "name-upper": {"source-name": "ImageNet"},
                        "name-10k": {"source-name": TEXT["10k-chars"]}, "kind-unknown": {"source-kind": "s3"},
                        "mount-relative": {"source-mount_path": "data"},
                        "mount-traversal": {"source-mount_path": "/data/../etc"},
                        "nfs-path-nul": {"source-nfs_path": "/a\x00"}, "nfs-server-empty": {"source-nfs_server": ""},
                        "pvc-claim-empty": {"source-kind": "pvc", "source-nfs_server": ""},
                        "nfs-server-port": {"source-nfs_server": "nfs.example.org:2049"},
                        "nfs-server-user": {"source-nfs_server": "root@nfs.example.org"},
                        "nfs-path-options": {"source-nfs_path": "/x,ro=false"},
                        "nfs-path-traversal": {"source-nfs_path": "/exports/../etc"},
                        "nfs-path-relative": {"source-nfs_path": "exports/x"}}.items():
    page(f"form-data-source-{label}", "deptadmin", "org:data", [], {**SOURCE_FORM, **override})
for label, override in {"project-arabic-digit": {"registry-project": "\u0661"},
                        "project-unseen": {"registry-project": "{forecasting}"},
                        "name-bad": {"registry-name": "NV CR"}, "registry-nul": {"registry-registry": "nvcr.io\x00"},
                        "registry-empty": {"registry-registry": ""}, "password-nul": {"registry-password": "p\x00"},
                        "registry-scheme": {"registry-registry": "http://nvcr.io"},
                        "registry-file": {"registry-registry": "file:///etc/passwd"},
                        "registry-userinfo": {"registry-registry": "user:pw@nvcr.io"},
                        "registry-newline": {"registry-registry": "nvcr.io\nevil.example.org"},
                        "registry-traversal": {"registry-registry": "nvcr.io/../x"},
                        "registry-dots": {"registry-registry": ".."},
                        "password-too-long": {"registry-password": "p" * 5000}}.items():
    page(f"form-pull-secret-{label}", "deptadmin", "org:data", [], {**SECRET_FORM, **override})
page("form-data-as-researcher", "alice", "org:data", [], SOURCE_FORM, status=403)
page("form-data-source-delete-unknown", "admin", "org:data_source_delete", [2**63], {}, status=404)
page("form-pull-secret-delete-unknown", "admin", "org:pull_secret_delete", [2**63], {}, status=404)
CREDENTIAL_FORM = {"project": "{vision}", "name": "wandb", "values": "WANDB_API_KEY=x"}
for label, override in {"project-arabic-digit": {"project": "\u0661"}, "project-unseen": {"project": "{forecasting}"},
                        "name-nul": {"name": "wa\x00ndb"}, "name-upper": {"name": "WandB"},
                        "values-nul": {"values": "A=x\x00y"}, "values-no-equals": {"values": "junk"},
                        "values-duplicate-key": {"values": "A=1\nA=2"}, "values-bad-name": {"values": "1A=x"},
                        "values-reserved-name": {"values": "PORTAL_TOKEN=x"}, "values-empty": {"values": ""},
                        "values-too-long": {"values": "A=" + "x" * 100_001}}.items():
    page(f"form-credential-{label}", "alice", "workloads:credentials", [], {**CREDENTIAL_FORM, **override})
page("form-credential-values-unknown", "alice", "workloads:credential_values", [2**63], {"values": "A=1"}, status=404)
page("form-credential-delete-unknown", "alice", "workloads:credential_delete", [2**63], {}, status=404)
IDLE_FORM = {"threshold_percent": "10", "idle_minutes": "30", "cull_notebooks": "", "warning_minutes": "15"}
for field_name in ("threshold_percent", "idle_minutes", "warning_minutes"):
    lowest = {"minus-one": "-1"} if field_name == "warning_minutes" else {"zero": "0"}  # no warning is a choice
    for label, value in {**lowest, "2**63": str(2**63), "arabic-digit": "\u0661", "float": "1.5", "nan": "NaN",
                         "nul": "1\x00", "empty": ""}.items():
        page(f"form-held-idle-{field_name}-{label}", "admin", "workloads:held_idle", [],
             {**IDLE_FORM, field_name: value})
page("form-held-idle-as-researcher", "alice", "workloads:held_idle", [], IDLE_FORM, status=404)
# The weights page's project defaults (htmx: the row comes back with the message), and references out of sight.
for label, value in {"arabic-digit": "\u0661", "unknown": str(2**63), "nul": "1\x00", "name": "train"}.items():
    page(f"form-weights-default-priority-class-{label}", "lead", "org:weights", [],
         {"project": "{vision}", "default_priority_class": value, "version": "{v_vision}"},
         shows="Null characters" if label == "nul" else "Select a valid choice", follow=True)
page("form-weights-quota-unseen", "lead", "org:weights", [], {"quota": "{q_forecasting_h100}",
                                                              "over_quota_weight": "1"}, status=404)
page("form-weights-quota-arabic-digit", "lead", "org:weights", [], {"quota": "\u0661", "over_quota_weight": "1"},
     status=404)
page("form-weights-project-unseen", "lead", "org:weights", [], {"project": "{forecasting}",
                                                                "default_priority_class": ""}, status=404)
page("form-weights-project-2**63", "lead", "org:weights", [], {"project": str(2**63), "default_priority_class": ""},
     status=404)
# Edit forms: version, references and choices.
EDIT_PROJECT = {"name": "Vision", "description": "", "default_priority_class": "{pc_train}", "version": "{v_vision}"}
for label, override in {"priority-class-arabic-digit": {"default_priority_class": "\u0661"},
                        "priority-class-unknown": {"default_priority_class": str(2**63)},
                        "version-garbage": {"version": "x"}, "version-2**63": {"version": str(2**63)},
                        "name-nul": {"name": "a\x00"}}.items():
    page(f"form-project-edit-{label}", "deptadmin", "org:project_edit", ["vision"], {**EDIT_PROJECT, **override})
EDIT_POOL = {**POOL_FORM, "slug": "h100", "name": "H100", "capacity": "64", "node_labels": "portal.gpu/pool=h100",
             "version": "{v_pool_h100}"}
EDIT_DEPARTMENT = {**DEPARTMENT_FORM, "slug": "research", "name": "Research", "version": "{v_research}"}
EDIT_PRIORITY = {**PRIORITY_FORM, "name": "train", "value": "50", "preemptible": "on", "version": "{v_pc_train}"}
for label, override in {"mig-profile-bad": {"cut": "mig", "mig_profile": "huge"},
                        "capacity-2**63": {"capacity": str(2**63)}, "fraction-above-one": {"card_fraction": "2/1"},
                        "fraction-zero": {"card_fraction": "0/1"}, "labels-bad-key": {"node_labels": "bad key!=x"},
                        "taints-bad-effect": {"node_taints": "a=b:Sometimes"},
                        "version-garbage": {"version": "x"}}.items():
    page(f"form-pool-edit-{label}", "admin", "org:pool_edit", ["h100"], {**EDIT_POOL, **override})
for label, override in {"weight-2**63": {"max_project_weight": str(2**63)},
                        "weights-inverted": {"min_project_weight": "5", "max_project_weight": "1"},
                        "version-stale": {"version": "0"}}.items():
    page(f"form-department-edit-{label}", "admin", "org:department_edit", ["research"],
         {**EDIT_DEPARTMENT, **override})
for label, override in {"value-2**63": {"value": str(2**63)}, "value-arabic-digit": {"value": "\u0661"},
                        "version-nul": {"version": "1\x00"}}.items():
    page(f"form-priority-class-edit-{label}", "admin", "org:priority_class_edit", ["train"],
         {**EDIT_PRIORITY, **override})
RULE_EDIT = {**RULE_FORM, "version": "{v_rule}"}
for label, override in {"pattern-nul": {"group_pattern": "ml\x00"}, "role-unknown": {"role": "root"},
                        "scope-unknown": {"scope": "project:" + str(2**63)},
                        "scope-arabic": {"scope": "project:\u0661"},
                        "version-missing": {"version": ""}}.items():
    page(f"form-group-rule-edit-{label}", "admin", "accounts:group_rule_edit", ["{rule}"], {**RULE_EDIT, **override})
page("form-group-rule-edit-unknown", "admin", "accounts:group_rule_edit", [2**63], RULE_EDIT, status=404)
page("form-group-rule-edit-as-lead", "lead", "accounts:group_rule_edit", ["{rule}"], RULE_EDIT, status=403)
TEMPLATE_EDIT = {**TEMPLATE_FORM, "values": '{"gpus": 1}', "version": "{v_template}"}
for label, override in {"kind-unknown": {"kind": "serving"}, "values-deep": {"values": DEEP},
                        "version-garbage": {"version": "x"}, "name-nul": {"name": "a\x00"}}.items():
    page(f"form-template-edit-{label}", "admin", "workloads:template_edit", ["{template}"],
         {**TEMPLATE_EDIT, **override})
page("form-template-edit-unknown", "admin", "workloads:template_edit", [2**63], TEMPLATE_EDIT, status=404)
page("form-role-binding-group-arabic-digit", "admin", "accounts:role_binding_create", [],
     {**BINDING_FORM, "username": "", "group": "\u0661"})
page("form-role-binding-delete-unseen", "deptadmin", "accounts:role_binding_delete", ["{rb_carol}"], {},
     status=404)
page("form-token-revoke-others", "alice", "accounts:token_revoke", ["{token_bob}"], {}, status=404)
# Past Django's upload limits: a bad request, not a form that saved part of it.
page("form-token-3mb-name", "alice", "accounts:tokens", [], {"name": "x" * 3_000_000}, status=400)
page("form-token-1500-fields", "alice", "accounts:tokens", [], {"name": "ci", **{f"f{i}": "1" for i in range(1500)}},
     status=400)
# The submit form's references picked by id: a Unicode digit would pick row 1.
for label, override in {"node-pool-arabic-digit": {"node_pool": "\u0661"},
                        "priority-class-arabic-digit": {"priority_class": "\u0661"},
                        "node-pool-2**63": {"node_pool": str(2**63)},
                        "data-sources-arabic-digit": {"data_sources": "\u0661"},
                        "credentials-unknown": {"credentials": str(2**63)},
                        "max-runtime-2**63": {"max_runtime_minutes": str(2**63)},
                        "shm-nan": {"shm_gib": "NaN"}, "pods-2**63": {"pods": str(2**63)}}.items():
    page(f"form-submit-training-{label}", "alice", "workloads:submit", ["training"],
         {**WORKLOAD_FORM["training"], **override})
page("form-submit-resubmitted-from-unseen", "bob", "workloads:submit", ["training"],
     {**WORKLOAD_FORM["training"], "project": "{nlp}", "resubmitted_from": "{finished}"}, status=404)
# Session forms without the CSRF token.
page("csrf-form-department-create", "admin", "org:department_create", [], DEPARTMENT_FORM, status=403, csrf=True)
page("csrf-form-bulk-stop", "alice", "workloads:bulk_stop", [], {"ids": "{live}", "confirmed": "1"}, status=403,
     csrf=True)
page("csrf-form-token-create", "alice", "accounts:tokens", [], {"name": "ci"}, status=403, csrf=True)
page("csrf-form-credential", "alice", "workloads:credentials", [], CREDENTIAL_FORM, status=403, csrf=True)
page("csrf-form-logout", "alice", "accounts:logout", [], {}, status=403, csrf=True)
# The queue, node, data, credential and idle endpoints: ids in paths, filters, pages and the idle rule's bodies.
for label, value in {"superscript-digit": "%C2%B2", "nul": "%00", "2**63": str(2**63), "negative": "-1",
                     "float": "1.5"}.items():
    for resource in ("cluster-queues", "local-queues", "nodes", "data-sources", "pull-secrets", "credentials"):
        add(Case(f"path-{resource}-{label}", "admin", "GET", f"{resource}/{value}/"))
for label in ("superscript-digit", "arabic-digit", "nul", "invalid-utf8", "2**63"):
    add(Case(f"query-nodes-node_pool-{label}", "alice", "GET", f"nodes/?node_pool={QUERY[label]}"))
    for param in ("node_pool", "project", "user", "start", "end"):
        add(Case(f"query-usage-holders-{param}-{label}", "alice", "GET", f"usage/holders/?{param}={QUERY[label]}"))
    for param in ("start", "end", "granularity", "department", "node_pool"):
        add(Case(f"query-usage-over-time-{param}-{label}", "alice", "GET",
                 f"usage/over-time/?{param}={QUERY[label]}"))
for path in ("cluster-queues/", "cohorts/", "flavors/", "nodes/", "data-sources/", "held-idle/", "usage/holders/"):
    for label, query in PAGINATION.items():
        add(Case(f"page-{path.strip('/').replace('/', '-')}-{label}", "admin", "GET", f"{path}?{query}"))
for label, body in {"threshold-zero": {"threshold_percent": 0}, "threshold-101": {"threshold_percent": 101},
                    "threshold-float": {"threshold_percent": 1.5}, "threshold-string": {"threshold_percent": "five"},
                    "threshold-arabic-digit": {"threshold_percent": "\u0661"},
                    "minutes-zero": {"idle_minutes": 0}, "minutes-2**63": {"idle_minutes": 2**63},
                    "warning-minus-one": {"warning_minutes": -1}, "warning-a-day-and-more": {"warning_minutes": 1441},
                    "cull-string": {"cull_notebooks": "maybe"}, "read-only-field": {"idle_seconds": 60},
                    "unknown-field": {"colour": "red"}, "nul": {"cull_notebooks": "\x00"}}.items():
    add(Case(f"idle-policy-{label}", "admin", "PATCH", "idle-policy/", body))
for label, raw in {"list": "[]", "string": '"x"', "100k-deep-json": DEEP, "invalid-utf8": b'{"x": "\xff"}',
                   "duplicate-keys": '{"idle_minutes": 5, "idle_minutes": 6}'}.items():
    add(Case(f"raw-idle-policy-{label}", "admin", "PATCH", "idle-policy/", raw, raw=True))
add(Case("idle-policy-as-department-admin", "deptadmin", "PATCH", "idle-policy/", {"idle_minutes": 5}, status=404),
    Case("held-idle-as-researcher", "alice", "GET", "held-idle/", status=404))
# Page filters and paths the tables above did not reach.
MORE_PAGE_FILTERS = {"org:audit": ["action", "object_type", "object_id", "since", "ordering", "project"],
                     "workloads:list": ["kind", "scope", "owner"],
                     "usage:reports": ["end", "department", "node_pool"],
                     "usage:holders": ["end", "node_pool", "model_label", "data_class"],
                     "usage:quota_history": ["project", "pool", "span"],
                     "usage:over_time": ["start", "end", "granularity", "department", "node_pool"]}
for url_name, params in MORE_PAGE_FILTERS.items():
    for param in params:
        for label in ("superscript-digit", "nul", "invalid-utf8"):
            if param in ("owner", "object_id", "action", "model_label", "data_class") and label != "nul":
                continue  # any text: matches nothing
            add(Case(f"filter-{url_name.replace(':', '-')}-{param}-{label}", "deptadmin", "GET",
                     f"@{url_name}|?{param}={QUERY[label]}", api=False))
for url_name in ("usage:holders_csv", "usage:reports_csv", "usage:over_time_csv"):
    for param in ("project", "department", "node_pool", "user", "start", "end"):
        if url_name == "usage:holders_csv" and param == "department":
            param = "model_label"  # the timeline is per pool and project: it takes no department
        if url_name == "usage:over_time_csv" and param in ("project", "user"):
            if param == "user":
                continue
            param = "granularity"  # the dashboard is a department's or the organisation's: no project, no user
        add(Case(f"filter-{url_name.replace(':', '-')}-{param}-nul", "deptadmin", "GET",
                 f"@{url_name}|?{param}={QUERY['nul']}", api=False, status=400))
add(Case("filter-workloads-list-ordering-unknown", "deptadmin", "GET", "@workloads:list|?ordering=password",
         api=False),
    # An unusable page number reads as the nearest page (filter_page), never a 500.
    Case("filter-workloads-list-page-2**63", "deptadmin", "GET", f"@workloads:list|?page={2**63}", api=False,
         empty=True),
    Case("filter-audit-page-nul", "admin", "GET", "@org:audit|?page=%00", api=False, empty=True),
    Case("filter-quota-history-unseen-project", "alice", "GET", "@usage:quota_history|?project=forecasting",
         api=False, status=400),
    Case("filter-quota-history-span-unknown", "alice", "GET", "@usage:quota_history|?span=decade", api=False,
         status=400),
    Case("path-queues-tab-unknown", "admin", "GET", "@usage:queues_tab|password", api=False, status=404),
    Case("path-nodes-unknown-pool", "admin", "GET", "@usage:nodes|b999", api=False, status=404),
    Case("path-project-queue-unseen", "alice", "GET", "@workloads:project_queue|forecasting", api=False,
         status=404),
    Case("path-workload-detail-unseen", "carol", "GET", "@workloads:detail|{finished}", api=False, status=404),
    Case("path-workload-connect-not-notebook", "alice", "GET", "@workloads:connect|{finished}", api=False,
         status=404),
    Case("path-workload-notebook-not-notebook", "alice", "GET", "@workloads:notebook|{finished}|tree", api=False,
         status=404),
    Case("path-workload-stop-unseen-get", "carol", "GET", "@workloads:stop|{finished}", api=False, status=404),
    Case("path-submit-kind-unknown", "alice", "GET", "@workloads:submit|serving", api=False, status=404),
    Case("path-template-delete-unknown", "admin", "GET", f"@workloads:template_delete|{2**63}", api=False,
         status=404))

TOTAL = len(CASES)


def case_id(index: int, case: Case) -> str:
    return f"{'api' if case.api else 'page'}-{index + 1:03d}/{TOTAL}-{re.sub(r'[^A-Za-z0-9*_-]+', '_', case.name)}"


# --- running a case -----------------------------------------------------------------------------------------------

MODELS = [NodePool, Department, Project, Quota, PriorityClass, RoleBinding, GroupRoleRule, PersonalAccessToken,
          Workload, WorkloadTemplate, Intent, DataSource, ImagePullSecret, Credential, IdlePolicy,
          NotificationPreference, WorkloadEvent, Budget]


def snapshot() -> dict[str, Any]:
    """Every row a refused request could change (audit rows and intents counted), but timestamps a read bumps."""
    state: dict[str, Any] = {"audit": AuditEvent.objects.count()}
    for model in MODELS:
        names = [f.attname for f in model._meta.concrete_fields if f.name != "last_used_at"]
        state[model.__name__] = list(model.objects.order_by("pk").values_list(*names))
    return state


@pytest.fixture(scope="module")
def module_ids(django_db_setup, django_db_blocker):
    """`ids`, made once for this module's thousand-odd cases inside a transaction of its own: each test's transaction
    nests in it and rolls back to it, and it rolls back after the module."""
    from django.db import transaction

    from tests.conftest import demo_users

    with django_db_blocker.unblock():
        outer = transaction.atomic()
        outer.__enter__()
        made = make_ids(demo_users())
    yield made
    with django_db_blocker.unblock():
        transaction.set_rollback(True)
        outer.__exit__(None, None, None)


@pytest.fixture
def ids(module_ids, db):
    return module_ids


def make_ids(demo):
    """The demo ids, plus a pool without quotas and a finished workload that the pool and `train` refer to; a live
    workload of alice's, a finished one of bob's, a token of bob's, a group rule and a template (and the versions
    their edit forms carry)."""
    spare = NodePoolFactory(slug="spare")
    train = PriorityClass.objects.get(name="train")
    finished = WorkloadFactory(project=Project.objects.get(slug="vision"), owner=demo["alice"], node_pool=spare,
                               priority_class=train, status="succeeded")
    live = WorkloadFactory(project=Project.objects.get(slug="vision"), owner=demo["alice"], node_pool=spare,
                           priority_class=train, status="queued")
    resubmittable = WorkloadFactory(project=Project.objects.get(slug="vision"), owner=demo["alice"],
                                    node_pool=NodePool.objects.get(slug="h100"), priority_class=train,
                                    status="succeeded")
    bob_finished = WorkloadFactory(project=Project.objects.get(slug="nlp"), owner=demo["bob"], node_pool=spare,
                                   priority_class=train, status="succeeded")
    token_bob, _ = personal_token_create(user=demo["bob"], name="bob's")
    rule = GroupRoleRule.objects.create(group_pattern="ops-*", role="viewer", scope="everything")
    template = WorkloadTemplate.objects.create(name="t1", kind="training", values={"gpus": 1})
    return {**demo_ids(), "pool_spare": spare.pk, "finished": finished.pk, "live": live.pk,
            "resubmittable": resubmittable.pk,
            "bob_finished": bob_finished.pk, "token_bob": token_bob.pk, "rule": rule.pk, "template": template.pk,
            "v_vision": Project.objects.get(slug="vision").version, "v_rule": rule.version,
            "v_q_vision_h100": Quota.objects.get(project__slug="vision", node_pool__slug="h100").version,
            "v_pool_h100": NodePool.objects.get(slug="h100").version,
            "v_research": Department.objects.get(slug="research").version,
            "v_pc_train": train.version,
            "v_template": template.version}


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


def assert_api_error(response: Any, case: Case) -> None:
    assert 400 <= response.status_code < 500, (response.status_code, response.content[:300])
    if case.status is not None:
        assert response.status_code == case.status, (response.status_code, response.content[:300])
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
def test_hostile_input_is_refused_with_a_clear_4xx_and_changes_nothing(case, ids, client, client_for, demo,
                                                                       django_capture_on_commit_callbacks):
    signed_in = client_for(case.persona) if case.persona else client
    if case.csrf:
        signed_in = Client(enforce_csrf_checks=True)
        signed_in.force_login(demo[case.persona])
    url = resolve(case, ids)
    before = snapshot()
    with django_capture_on_commit_callbacks() as callbacks:
        response = send(signed_in, case, url, ids)
    if case.empty:
        assert_matches_nothing(response, case)
    elif case.api:
        assert_api_error(response, case)
    else:
        assert_page_error(response, case)
    assert snapshot() == before, "a refused request changed a row, an audit entry or an intent"
    assert callbacks == [], "a refused request enqueued work for the cluster"


# The bodies the cases change one field of: each is accepted as it is, so a case is refused for its hostile value
# and not for something its base already lacked (a submission token, a version, a required field).
BASES = [
    Case("api-node-pool", "admin", "POST", "node-pools/", POOL),
    Case("api-department", "admin", "POST", "departments/", DEPARTMENT),
    Case("api-project", "deptadmin", "POST", "projects/", PROJECT),
    Case("api-quota", "admin", "POST", "quotas/", QUOTA),
    Case("api-priority-class", "admin", "POST", "priority-classes/", PRIORITY),
    Case("api-role-binding", "admin", "POST", "role-bindings/", BINDING),
    Case("api-token", "alice", "POST", "tokens/", TOKEN),
    *(Case(f"api-submit-{kind}", "alice", "POST", "workloads/", body) for kind, body in SUBMITS.items()),
    Case("api-template", "admin", "POST", "templates/", TEMPLATE),
    Case("api-resubmit", "alice", "POST", "workloads/{resubmittable}/resubmit/", {}),
    Case("api-logs", "alice", "GET", "workloads/{finished}/logs/?lines=10&timeout=5&follow=false"),
    Case("form-pool", "admin", "POST", "@org:pool_create|", POOL_FORM, api=False),
    Case("form-department", "admin", "POST", "@org:department_create|", DEPARTMENT_FORM, api=False),
    Case("form-project", "deptadmin", "POST", "@org:project_create|research", PROJECT_FORM, api=False),
    Case("form-priority-class", "admin", "POST", "@org:priority_class_create|", PRIORITY_FORM, api=False),
    Case("form-role-binding", "admin", "POST", "@accounts:role_binding_create|", BINDING_FORM, api=False),
    Case("form-role-binding-as-deptadmin", "deptadmin", "POST", "@accounts:role_binding_create|", BINDING_FORM,
         api=False),
    Case("form-quota-table", "admin", "POST", "@org:department_quotas|research",
         {QUOTA_TABLE: {("vision", "h100", "deserved"): "3"}}, api=False),
    Case("api-quota-table", "admin", "PATCH", "departments/research/quotas/",
         [{"node_pool": "h100", "project": "vision", "deserved": 3}]),
    Case("form-login", "", "POST", "@accounts:login|", {"username": "admin", "password": DEMO_PASSWORD},
         api=False),
    Case("api-token-sign-in", "", "POST", "auth/token/", {"username": "admin", "password": DEMO_PASSWORD}),
    Case("form-group-rule", "admin", "POST", "@accounts:group_rule_create|", RULE_FORM, api=False),
    Case("form-token", "alice", "POST", "@accounts:tokens|", {"name": "ci", "expires_on": ""}, api=False,
         status=200),  # the page shows the new secret once
    *(Case(f"form-submit-{kind}", "alice", "POST", f"@workloads:submit|{kind}", data, api=False)
      for kind, data in WORKLOAD_FORM.items()),
    Case("form-template", "admin", "POST", "@workloads:template_create|",
         {**TEMPLATE_FORM, "values": '{"gpus": 1}'}, api=False),
    Case("form-data-source", "deptadmin", "POST", "@org:data|", SOURCE_FORM, api=False),
    Case("form-pull-secret", "deptadmin", "POST", "@org:data|", SECRET_FORM, api=False),
    Case("form-credential", "alice", "POST", "@workloads:credentials|", CREDENTIAL_FORM, api=False),
    Case("form-held-idle", "admin", "POST", "@workloads:held_idle|", IDLE_FORM, api=False),
    Case("form-weights", "lead", "POST", "@org:weights|",
         {"quota": "{q_vision_h100}", "over_quota_weight": "1", "version": "{v_q_vision_h100}"}, api=False),
    Case("form-weights-default", "lead", "POST", "@org:weights|",
         {"project": "{vision}", "default_priority_class": "{pc_build}", "version": "{v_vision}"}, api=False),
    Case("form-project-edit", "deptadmin", "POST", "@org:project_edit|vision", EDIT_PROJECT, api=False),
    Case("form-pool-edit", "admin", "POST", "@org:pool_edit|h100", EDIT_POOL, api=False),
    Case("form-department-edit", "admin", "POST", "@org:department_edit|research", EDIT_DEPARTMENT, api=False),
    Case("form-priority-class-edit", "admin", "POST", "@org:priority_class_edit|train", EDIT_PRIORITY, api=False),
    Case("form-group-rule-edit", "admin", "POST", "@accounts:group_rule_edit|{rule}", RULE_EDIT, api=False),
    Case("form-template-edit", "admin", "POST", "@workloads:template_edit|{template}", TEMPLATE_EDIT, api=False),
    Case("form-budget", "lead", "POST", "@usage:budget_create|", BUDGET_FORM, api=False),
    Case("form-policy", "deptadmin", "POST", "@workloads:policy_create|", POLICY_FORM, api=False),
    Case("form-channel", "lead", "POST", "@org:notification_channel_create|", CHANNEL_FORM, api=False),
]


@pytest.mark.parametrize("case", [pytest.param(case, id=case.name) for case in BASES])
def test_each_base_body_is_accepted_as_it_is(case, ids, client, client_for):
    response = send(client_for(case.persona) if case.persona else client, case, resolve(case, ids), ids)
    expected = (case.status,) if case.status else (200, 201, 202) if case.api else (302,)
    shown = re.findall(r"errorlist[^>]*>(.*?)</ul>|message error[^>]*>([^<]*)", response.content.decode(
        errors="replace"), re.S)
    assert response.status_code in expected, (response.status_code, shown or response.content[:400])
    if response.status_code == 302:
        assert "error" not in response.get("Location", ""), response["Location"]


def test_the_catalogue_holds_at_least_150_cases():
    assert TOTAL >= 150
