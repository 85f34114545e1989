"""The department quota table: live totals and per-cell errors over htmx, all-or-nothing saves through
quota_table_save."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from apps.core.models import AuditEvent
from apps.org import services, signals
from apps.org.models import Department, NodePool, Project, Quota

from .view_helpers import cell_key, quota_payload

HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def org(users):
    return {
        "research": Department.objects.get(slug="research"), "vision": Project.objects.get(slug="vision"),
        "nlp": Project.objects.get(slug="nlp"), "h100": NodePool.objects.get(slug="h100"),
        "l40s": NodePool.objects.get(slug="l40s-shared"), "url": reverse("org:department_quotas", args=["research"]),
    }


def stored() -> list[tuple]:
    return list(Quota.objects.order_by("pk").values_list("pk", "deserved", "limit", "over_quota_weight"))


def cell_errors(html: str, owner, pool) -> str:
    match = re.search(rf'<span class="cell-errors errorlist" id="err-{cell_key(owner, pool)}"[^>]*>(.*?)</span>\n?',
                      html, re.S)
    assert match, f"no error slot for {cell_key(owner, pool)}"
    return re.sub(r"<[^>]+>", " ", match[1]).strip()


def totals_cell(html: str, row_id: str, pool_slug: str) -> str:
    row = re.search(rf'<tr id="{row_id}".*?</tr>', html, re.S)
    assert row
    cell = re.search(rf'data-pool="{pool_slug}">(.*?)</td>', row[0], re.S)
    assert cell
    return " ".join(re.sub(r"<[^>]+>", " ", cell[1]).split())


def test_page_shows_every_row_and_pool(page_client, org):
    html = page_client("admin").get(org["url"]).content.decode()
    for name in ("Research", "Vision", "NLP"):
        assert name in html
    assert 'hx-trigger="input changed delay:300ms"' in html
    assert totals_cell(html, "quota-totals", "h100") == "8 / 8"
    assert "read-only" not in html


def test_department_admin_cannot_edit_the_department_row(page_client, org):
    html = page_client("deptadmin").get(org["url"]).content.decode()
    department_input = re.search(rf'<input[^>]*name="{cell_key(org["research"], org["h100"])}-deserved"[^>]*>', html)
    project_input = re.search(rf'<input[^>]*name="{cell_key(org["vision"], org["h100"])}-deserved"[^>]*>', html)
    assert department_input and "disabled" in department_input[0]
    assert project_input and "disabled" not in project_input[0]
    assert "Only admins change the department&#x27;s own row." in html or "Only admins change" in html


def test_live_totals_update_without_saving(page_client, org):
    before, audit = stored(), AuditEvent.objects.count()
    payload = quota_payload(org["research"], {(org["nlp"], "h100", "deserved"): 2})
    response = page_client("admin").post(org["url"], payload, **HTMX)
    html = response.content.decode()
    assert response.status_code == 200
    assert "<html" not in html  # the partial, not the page
    assert "All cells valid" in html and "1 unsaved change" in html
    assert totals_cell(html, "quota-totals", "h100") == "6 / 8"
    assert totals_cell(html, "quota-remaining", "h100").startswith("2 ")
    assert 'hx-swap-oob="true"' in html
    assert stored() == before and AuditEvent.objects.count() == audit


def test_live_check_shows_refused_over_subscription_on_its_cell(page_client, org):
    payload = quota_payload(org["research"], {(org["research"], "h100", "deserved"): 12})
    html = page_client("admin").post(org["url"], payload, **HTMX).content.decode()
    assert cell_errors(html, org["research"], org["h100"]) == (
        "h100 has 16 units and other departments hold 8, so at most 8 can be given here. "
        "Lower another department's quota, or mark the pool over-subscribable."
    ).replace("'", "&#x27;")
    assert "1 cell needs attention" in html
    assert cell_errors(html, org["vision"], org["h100"]) == ""


def test_live_check_project_over_department(page_client, org):
    payload = quota_payload(org["research"], {(org["vision"], "h100", "deserved"): 6})
    html = page_client("deptadmin").post(org["url"], payload, **HTMX).content.decode()
    assert "Research has 8 deserved units on h100 and its other projects hold 4, so this project can have at most 4." \
        in cell_errors(html, org["vision"], org["h100"])
    assert totals_cell(html, "quota-remaining", "h100").startswith("-2")


def test_live_check_shape_and_limit_errors(page_client, org):
    payload = quota_payload(org["research"], {(org["vision"], "h100", "deserved"): "lots",
                                              (org["nlp"], "h100", "limit"): 2})
    html = page_client("admin").post(org["url"], payload, **HTMX).content.decode()
    assert "Enter a whole number." in cell_errors(html, org["vision"], org["h100"])
    assert "The limit (2) cannot be below the deserved quota (4)." in cell_errors(html, org["nlp"], org["h100"])


def test_refused_over_subscription_on_save_shows_message_and_saves_nothing(page_client, org):
    before, audit = stored(), AuditEvent.objects.count()
    payload = quota_payload(org["research"], {(org["research"], "h100", "deserved"): 12,
                                              (org["vision"], "l40s-shared", "weight"): 5})
    response = page_client("admin").post(org["url"], payload)
    html = response.content.decode()
    assert response.status_code == 200
    assert "Nothing was saved: fix the cells marked below." in html
    assert "so at most 8 can be given here" in cell_errors(html, org["research"], org["h100"])
    assert stored() == before and AuditEvent.objects.count() == audit


def test_save_is_all_or_nothing_when_a_service_refuses(page_client, org, request):
    """A refusal raised inside the save (here a guard like the non-preemptible one) rolls back every cell."""
    def guard(quota, **_):
        if quota.project_id == org["nlp"].pk:
            return {"deserved": ["Running non-preemptible work uses 3 units here."]}
        return None

    signals.quota_size_proposed.connect(guard, weak=False, dispatch_uid="test.guard")
    request.addfinalizer(lambda: signals.quota_size_proposed.disconnect(dispatch_uid="test.guard"))
    before, audit = stored(), AuditEvent.objects.count()
    payload = quota_payload(org["research"], {(org["vision"], "h100", "deserved"): 3,
                                              (org["nlp"], "h100", "deserved"): 2})
    response = page_client("admin").post(org["url"], payload)
    html = response.content.decode()
    assert "Running non-preemptible work uses 3 units here." in cell_errors(html, org["nlp"], org["h100"])
    assert stored() == before and AuditEvent.objects.count() == audit


def test_save_applies_department_and_projects_in_a_valid_order(page_client, users, org):
    """Raise a department with its project on one pool, lower both on another: one save, a valid order."""
    services.node_pool_update(actor=users["admin"], node_pool=org["h100"], over_subscribable=True)
    payload = quota_payload(org["research"], {
        (org["research"], "h100", "deserved"): 10, (org["research"], "h100", "limit"): 12,
        (org["vision"], "h100", "deserved"): 6,
        (org["research"], "l40s-shared", "deserved"): 12,
        (org["vision"], "l40s-shared", "deserved"): 6, (org["nlp"], "l40s-shared", "deserved"): 6,
    })
    audit = AuditEvent.objects.count()
    response = page_client("admin").post(org["url"], payload, follow=True)
    assert "Saved 5 quota cells of Research." in response.content.decode()
    assert Quota.objects.get(department=org["research"], node_pool=org["h100"]).deserved == 10
    assert Quota.objects.get(project=org["vision"], node_pool=org["h100"]).deserved == 6
    assert Quota.objects.get(department=org["research"], node_pool=org["l40s"]).deserved == 12
    events = AuditEvent.objects.order_by("id")[audit:]
    assert [e.action for e in events] == ["quota.update"] * 5
    assert all(e.actor == users["admin"] for e in events)
    vision = next(e for e in events if e.project_id == org["vision"].pk and e.after["node_pool_id"] == org["h100"].pk)
    assert (vision.before["deserved"], vision.after["deserved"]) == (4, 6)


def test_save_keeps_cpu_and_memory(page_client, users, org):
    quota = Quota.objects.get(project=org["vision"], node_pool=org["h100"])
    Quota.objects.filter(pk=quota.pk).update(cpu_cores=32, memory_gib=256)
    payload = quota_payload(org["research"], {(org["vision"], "h100", "weight"): 4})
    page_client("admin").post(org["url"], payload)
    quota.refresh_from_db()
    assert (quota.over_quota_weight, quota.cpu_cores, quota.memory_gib) == (4, 32, 256)


def test_department_admin_tampering_with_the_department_row_changes_nothing(page_client, org):
    payload = quota_payload(org["research"], {(org["research"], "h100", "deserved"): 2,
                                              (org["vision"], "h100", "weight"): 3})
    response = page_client("deptadmin").post(org["url"], payload)
    assert response.status_code == 302
    assert Quota.objects.get(department=org["research"], node_pool=org["h100"]).deserved == 8
    assert Quota.objects.get(project=org["vision"], node_pool=org["h100"]).over_quota_weight == 3


def test_empty_cell_creates_a_quota_and_blank_cells_stay_empty(page_client, users, org):
    project = services.project_create(actor=users["admin"], department=org["research"], slug="speech", name="Speech")
    payload = quota_payload(org["research"], {(project, "h100", "deserved"): 0, (project, "h100", "limit"): 2})
    response = page_client("deptadmin").post(org["url"], payload)
    assert response.status_code == 302
    quota = Quota.objects.get(project=project)
    assert (quota.node_pool, quota.deserved, quota.limit, quota.over_quota_weight) == (org["h100"], 0, 2, 1)
    assert AuditEvent.objects.filter(action="quota.create", object_id=str(quota.pk)).exists()


def test_clearing_an_existing_cell_is_refused(page_client, org):
    payload = quota_payload(org["research"], {(org["vision"], "h100", "deserved"): ""})
    html = page_client("admin").post(org["url"], payload).content.decode()
    assert "Enter the deserved units (0 for none)." in cell_errors(html, org["vision"], org["h100"])


def test_unchanged_save_says_nothing_changed(page_client, org):
    audit = AuditEvent.objects.count()
    response = page_client("admin").post(org["url"], quota_payload(org["research"]), follow=True)
    assert "Nothing changed." in response.content.decode()
    assert AuditEvent.objects.count() == audit


def test_rule_check_is_pure(users, org, django_assert_num_queries):
    """The live check and the services share services.quota_rule_errors, which runs no queries."""
    with django_assert_num_queries(0):
        errors = services.quota_rule_errors(
            pool=org["h100"], deserved=5, limit=4, department=org["research"], for_project=True,
            department_deserved=8, siblings_deserved=4)
    assert errors == {
        "limit": "The limit (4) cannot be below the deserved quota (5).",
        "deserved": "Research has 8 deserved units on h100 and its other projects hold 4, so this project can have "
                    "at most 4. Raise the department's quota first or lower another project's.",
    }


def test_table_queries_do_not_grow_with_projects(page_client, users, org, django_assert_num_queries):
    client = page_client("deptadmin")
    with django_assert_num_queries(9):
        client.get(org["url"])
    for number in range(5):
        services.project_create(actor=users["admin"], department=org["research"], slug=f"extra-{number}",
                                name=f"Extra {number}")
    with django_assert_num_queries(9):
        client.get(org["url"])


def _running_non_preemptible(users, org, gpus: int):
    """A running non-preemptible workload of Vision on h100 (submitted through the service, then mirrored running)."""
    from apps.workloads import services as workload_services
    from apps.workloads.models import Status, Workload

    workload = workload_services.workload_submit(
        actor=users["alice"], project=org["vision"], node_pool=org["h100"], kind="training", name="held",
        image="pytorch/pytorch:2.4.0", gpus=gpus, preemptible=False, model_label="resnet", data_class="public")
    Workload.objects.filter(pk=workload.pk).update(status=Status.RUNNING)


def test_live_check_reports_the_running_non_preemptible_refusal_exactly_as_save(page_client, users, org):
    _running_non_preemptible(users, org, gpus=3)
    payload = quota_payload(org["research"], {(org["vision"], "h100", "deserved"): 2})
    client = page_client("deptadmin")
    live = cell_errors(client.post(org["url"], payload, **HTMX).content.decode(), org["vision"], org["h100"])
    before, audit = stored(), AuditEvent.objects.count()
    saved = cell_errors(client.post(org["url"], payload).content.decode(), org["vision"], org["h100"])
    assert live == saved == (
        "Running non-preemptible work in this project holds 3 h100 units; the deserved quota cannot go below that "
        "until it finishes or is stopped.")
    assert stored() == before and AuditEvent.objects.count() == audit


def test_live_check_never_flags_an_untouched_cell(page_client, org):
    """Raising a project past its department flags that project only: the department's cell and the sibling's,
    untouched, stay clean although the stored sums around them now break a rule too."""
    payload = quota_payload(org["research"], {(org["vision"], "h100", "deserved"): 6})
    for username in ("admin", "deptadmin"):
        html = page_client(username).post(org["url"], payload, **HTMX).content.decode()
        assert "so this project can have at most 4" in cell_errors(html, org["vision"], org["h100"])
        assert cell_errors(html, org["research"], org["h100"]) == ""
        assert cell_errors(html, org["nlp"], org["h100"]) == ""
        assert "1 cell needs attention" in html


def test_save_with_a_shape_error_reports_the_rule_errors_of_other_cells_too(page_client, org):
    before = stored()
    payload = quota_payload(org["research"], {(org["vision"], "h100", "deserved"): "lots",
                                              (org["nlp"], "h100", "deserved"): 5})
    html = page_client("admin").post(org["url"], payload).content.decode()
    assert "Enter a whole number." in cell_errors(html, org["vision"], org["h100"])
    assert "so this project can have at most" in cell_errors(html, org["nlp"], org["h100"])
    assert stored() == before


# The table page's 9 (test_table_queries_do_not_grow_with_projects), then Save's own plan for the changed cell: its
# pool, projects, quotas, other departments' sums and the cell's guard.
LIVE_CHECK_QUERIES = 9 + 5


def test_live_check_queries_do_not_grow_with_projects(page_client, users, org, django_assert_num_queries):
    client = page_client("deptadmin")
    for round_number in range(2):
        payload = quota_payload(org["research"], {(org["vision"], "h100", "deserved"): 3})
        with django_assert_num_queries(LIVE_CHECK_QUERIES):
            client.post(org["url"], payload, **HTMX)
        for number in range(3):
            services.project_create(actor=users["admin"], department=org["research"],
                                    slug=f"extra-{round_number}-{number}", name=f"Extra {round_number} {number}")
