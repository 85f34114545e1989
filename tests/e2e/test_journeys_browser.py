"""Browser: every demo role walks the site breadth-first from the home page, following every same-origin link the
pages show (GET only, bounded in pages and time; downloads fetched, not rendered), and each page must answer below
400 with no JavaScript error, no failed request for the portal's assets, htmx partials that answer without an error
(one page of each polled shape also moves its clock on until its polls came back and swapped in), no raw template
syntax or "None" shown, the portal's stylesheet, and tables that fit their box at 1400 px. On the way: a researcher,
team lead or department admin never sees a link, queue or namespace name, project name or filter choice of another
department, and a viewer is offered no form or link that would change anything (beyond their own settings and
tokens). Screenshots of the main pages land in /tmp/journey to look at.

The data is the demo organisation reconciled into an in-process kubesim with the real watcher mirroring it, plus
workloads in several states across departments (running, queued, rejected, succeeded, stopped; training, batch and a
notebook), a template, credentials and data sources, so the tables, queues and reports have rows."""

from __future__ import annotations

import re
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, urljoin, urlsplit

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ROLES = ["admin", "deptadmin", "lead", "alice", "bob", "carol", "viewer"]
MAX_PAGES = 60  # per role
MAX_SECONDS = 25.0  # per role's walk, once it has reached MIN_PAGES (a loaded machine takes longer to get there)
MIN_PAGES = 10
MAX_QUERY_VARIANTS = 2  # of one path (filters, sorts, tabs): the first few are enough
MAX_OF_A_SHAPE = 1  # pages of one shape (/workloads/N/stop/, /projects/X/edit/): the rest look the same
MAX_WORKLOAD_PAGES = 10  # but a workload's page differs with its status: each one seeded
MAX_PAGE_NUMBER = 2
POLL_MS = 16_000  # past the slowest poll (every 15 s)
SCREENSHOTS = Path("/tmp/journey")
SCREENSHOT_PATHS = re.compile(
    r"^/(workloads/|workloads/\d+/|workloads/projects/[\w-]+/queue/|usage/(quota|reports|holders)/|usage/queues/"
    r"(cohorts/|flavors/)?|usage/nodes/h100/|weights/|departments/|departments/research/quotas/|pools/|"
    r"priority-classes/|accounts/(role-bindings|group-rules|tokens|settings)/|audit/|cluster-sync/|data/|"
    r"workloads/(credentials|templates|held-idle)/|workloads/submit/training/)?$")
# Not pages of the portal, or not ours to walk: signing out ends the journey; Django's admin and the notebook proxy
# are other applications (their first page is visited, not their links).
SKIP = re.compile(r"^/accounts/logout/|^/accounts/oidc/|^/workloads/\d+/(notebook/|connect/$)")
OUTSIDE = re.compile(r"^/django-admin/.+|^/api/v1/.+")
DOWNLOAD = re.compile(r"\.(csv|json|yaml|txt)$|/export")
# Links that lead to a write (a confirmation page or a form): a viewer must be offered none.
WRITE_LINK = re.compile(r"/(new|edit|delete|stop|keep-alive|revoke)/$|^/workloads/submit/")
# What a viewer may change: their own session, e-mail settings, personal tokens and their own notification channels
# (a viewer is told of their own work and budgets like anyone; project channels are for leads and admins).
VIEWER_OWN_FORMS = re.compile(r"^/accounts/(logout|settings|tokens)/|^/notifications/")
DEPARTMENT_OF = {"admin": None, "viewer": None, "deptadmin": "research", "lead": "research", "alice": "research",
                 "bob": "research", "carol": "data-science"}


@pytest.fixture
def journey_data(kubesim, live_cluster):
    """The demo organisation in kubesim with the watcher running; workloads running, queued, rejected, succeeded
    and stopped in three departments, a template, credentials and data sources. Returns {department slug: {workload
    ids}}."""
    from django.contrib.auth import get_user_model

    from apps.org import services as org_services
    from apps.org.models import DataSource, NodePool, Project
    from apps.workloads import services
    from apps.workloads.models import Kind, Status, Workload
    from tests.worker.conftest import wait_for
    from worker import tasks

    users = get_user_model().objects

    def submit(username, project, pool, name, gpus, kind=Kind.TRAINING, seconds=600, **extra):
        fields = {"image": "pytorch/pytorch:2.4.0", "command": ["sleep", str(seconds)], **extra}
        workload = services.workload_submit(
            actor=users.get(username=username), project=Project.objects.get(slug=project), kind=kind, name=name,
            node_pool=NodePool.objects.get(slug=pool), gpus=gpus, model_label="resnet", data_class="public", **fields)
        assert tasks.workload_submit.apply(args=[workload.pk]).get() == "submitted"
        return workload

    # Vision may hold 8 H100 units: two 4-unit runs fill it, a third waits.
    live = [submit("alice", "vision", "h100", "vision-a", 4), submit("alice", "vision", "h100", "vision-b", 4)]
    kubesim.advance(1)
    wait_for(lambda: all(Workload.objects.get(pk=w.pk).status == Status.RUNNING for w in live))
    queued = submit("alice", "vision", "h100", "vision-waits", 4, max_runtime_seconds=3600)
    live += [submit("bob", "nlp", "l40s-shared", "nlp-batch", 2, kind=Kind.BATCH),
             submit("carol", "forecasting", "a100-mig-3g40gb", "forecast-train", 2),
             submit("admin", "etl", "l40s-shared", "etl-train", 1),
             submit("bob", "nlp", "l40s-shared", "nlp-notebook", 1, kind=Kind.NOTEBOOK, command=[],
                    image="quay.io/jupyter/base-notebook:2024-05-27", notebook_idle_timeout_minutes=60)]
    # A preemptible run accepted while Serving lent its quota; Serving then stops lending and has no over-quota,
    # so Kueue never admits it.
    admin = users.get(username="admin")
    org_services.project_update(actor=admin, project=Project.objects.get(slug="serving"), does_not_lend=False)
    rejected = services.workload_submit(
        actor=admin, project=Project.objects.get(slug="serving"), kind=Kind.TRAINING, name="serving-train",
        node_pool=NodePool.objects.get(slug="l40s-shared"), gpus=1, model_label="resnet", data_class="public",
        image="pytorch/pytorch:2.4.0", command=["sleep", "600"])
    org_services.project_update(actor=admin, project=Project.objects.get(slug="serving"), does_not_lend=True)
    assert tasks.workload_submit.apply(args=[rejected.pk]).get() == "submitted"
    done = submit("bob", "nlp", "l40s-shared", "nlp-short", 1, seconds=30)
    kubesim.advance(1)
    statuses = lambda: dict(Workload.objects.values_list("name", "status"))  # noqa: E731
    wait_for(lambda: Workload.objects.get(pk=queued.pk).status == Status.QUEUED, describe=statuses)
    wait_for(lambda: Workload.objects.get(pk=rejected.pk).status == Status.REJECTED, describe=statuses)
    wait_for(lambda: all(Workload.objects.get(pk=w.pk).status == Status.RUNNING for w in live),
             describe=statuses)
    kubesim.advance(40)
    wait_for(lambda: Workload.objects.get(pk=done.pk).status == Status.SUCCEEDED, describe=statuses)
    stopped = submit("carol", "forecasting", "l40s-shared", "forecast-stopped", 1)
    kubesim.advance(1)
    wait_for(lambda: Workload.objects.get(pk=stopped.pk).status == Status.RUNNING, describe=statuses)
    services.workload_stop(actor=users.get(username="carol"), workload=stopped)
    assert tasks.workload_stop.apply(args=[stopped.pk]).get()
    kubesim.advance(1)
    wait_for(lambda: Workload.objects.get(pk=stopped.pk).status == Status.STOPPED, describe=statuses)
    # Rows of the pages that list them: a template, credentials and data sources in two departments.
    services.workload_template_create(actor=admin, name="resnet-sweep", kind=Kind.TRAINING,
                                      values={"gpus": 2, "image": "pytorch/pytorch:2.4.0"})
    for username, project in (("alice", "vision"), ("carol", "forecasting")):
        services.credential_create(actor=users.get(username=username), project=Project.objects.get(slug=project),
                                   name=f"wandb-{project}", values={"WANDB_API_KEY": "not-a-real-key"})
        org_services.data_source_create(
            actor=admin, project=Project.objects.get(slug=project), name=f"scratch-{project}",
            kind=DataSource.Kind.NFS, nfs_server="nfs.example.org", nfs_path=f"/exports/{project}",
            mount_path="/mnt/scratch")
    by_department: dict[str, set[int]] = {}
    for workload in Workload.objects.select_related("project__department"):
        by_department.setdefault(workload.project.department.slug, set()).add(workload.pk)
    yield by_department


def forbidden_links(username: str, by_department: dict[str, set[int]]) -> Scope | None:
    """What this user must never be shown: another department's projects, workloads and queues."""
    from apps.org.models import Department, Project

    own = DEPARTMENT_OF[username]
    if own is None:
        return None
    others = list(Project.objects.exclude(department__slug=own).values_list("pk", "slug", "namespace"))
    other_names = Project.objects.exclude(department__slug=own).values_list("name", flat=True)
    workload_ids = [str(pk) for slug, ids in by_department.items() if slug != own for pk in ids]
    links = [rf"/workloads/({'|'.join(workload_ids)})/"] if workload_ids else []
    other_departments = Department.objects.exclude(slug=own).values_list("slug", flat=True)
    names = [rf"\bdept-{re.escape(slug)}\b" for slug in other_departments]
    for _pk, slug, namespace in others:
        links += [rf"/projects/{slug}/", rf"[?&]project={slug}(&|$)", rf"\b{re.escape(namespace)}\b"]
        names += [rf"\b{re.escape(namespace)}\b", rf"\bproj-{slug}-"]
    projects = {str(pk) for pk, _slug, _namespace in others} | {slug for _pk, slug, _namespace in others}
    departments = {str(value) for row in Department.objects.exclude(slug=own).values_list("pk", "slug")
                   for value in row}
    return Scope(links=re.compile("|".join(links)), text=re.compile("|".join(names)), projects=projects,
                 departments=departments, labels=set(other_names))


@dataclass(frozen=True)
class Scope:
    """Another department's traces: links, queue and namespace names in the text, choices in the filters."""

    links: re.Pattern[str]
    text: re.Pattern[str]
    projects: set[str]  # ids and slugs
    departments: set[str]
    labels: set[str]  # project names: a cell, link or heading of exactly that text


def walk(page, username: str, forbidden: Scope | None) -> tuple[list[str], int]:
    """Breadth-first from "/": returns the problems found and how many pages were visited."""
    problems: list[str] = []
    origin = urlsplit(page.url)
    current = {"path": "/"}

    def on_console(message):
        if message.type == "error":
            problems.append(f"{current['path']}: console error: {message.text}")

    def on_response(response):
        request = response.request
        if request.headers.get("hx-request"):
            hx_answers.append(response.url)
        if response.status < 400 or urlsplit(response.url).netloc != origin.netloc:
            return
        if request.resource_type in {"stylesheet", "script", "image", "font"} or request.headers.get("hx-request"):
            problems.append(f"{current['path']}: {request.resource_type} {response.url} answered {response.status}")

    page.on("console", on_console)
    page.on("pageerror", lambda error: problems.append(f"{current['path']}: page error: {error}"))
    page.on("requestfailed", lambda request: problems.append(
        f"{current['path']}: request failed: {request.url} ({request.failure})") if (
        urlsplit(request.url).netloc == origin.netloc and request.resource_type != "document"
        and "ERR_ABORTED" not in (request.failure or "")) else None)  # aborted: the walk went on to the next page
    page.on("response", on_response)
    hx_answers: list[str] = []
    polled: set[str] = set()
    page.clock.install()  # the polls every 5 or 15 s come when the walk moves the page's clock on

    seen: set[str] = {"/"}
    variants: dict[str, int] = {}
    shapes: dict[str, int] = {}
    queue: deque[tuple[str, str]] = deque([("/", "start")])
    visited = 0
    deadline = time.monotonic() + MAX_SECONDS
    while queue and visited < MAX_PAGES and (time.monotonic() < deadline or visited < MIN_PAGES):
        path, came_from = queue.popleft()
        current["path"] = path
        if DOWNLOAD.search(urlsplit(path).path):
            answer = page.request.get(path)
            if answer.status >= 400:
                problems.append(f"{path} (linked from {came_from}): download answered {answer.status}")
            continue
        response = page.goto(path)
        visited += 1
        status = response.status if response else 0
        if status >= 400 or not status:
            problems.append(f"{path} (linked from {came_from}): answered {status}")
            continue
        if urlsplit(page.url).path.startswith("/accounts/login/"):
            problems.append(f"{path} (linked from {came_from}): sent back to the login page")
            continue
        if OUTSIDE.search(urlsplit(path).path) or path.startswith("/django-admin/"):
            continue  # another application's page: visited, not walked or judged by our rules
        check_page(page, path, username, forbidden, problems)
        shape = re.sub(r"\d+", "N", urlsplit(path).path)
        if shape not in polled and page.locator("[hx-trigger*='every']").count():
            polled.add(shape)  # one page of each shape waits for its polls: they answer, swap and still pass
            answered = len(hx_answers)
            page.clock.run_for(POLL_MS)
            give_up = time.monotonic() + 3
            while len(hx_answers) == answered and time.monotonic() < give_up:
                page.wait_for_timeout(50)
            page.clock.run_for(500)  # htmx swaps and settles on its timers
            if len(hx_answers) == answered:
                problems.append(f"{path}: no poll in {POLL_MS // 1000} s")
            else:
                check_page(page, path, username, forbidden, problems)
        if SCREENSHOT_PATHS.match(path):  # the main pages, one of each shape, to look at after a run
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            name = path.strip("/").replace("/", "_") or "home"
            page.screenshot(path=str(SCREENSHOTS / f"{username}-{name}.png"), full_page=True)
        for href in page.eval_on_selector_all("a[href]", "links => links.map(a => a.getAttribute('href'))"):
            target = next_link(urljoin(page.url, href), origin)
            if target is None or target in seen:
                continue
            bare, query = urlsplit(target).path, urlsplit(target).query
            shape = re.sub(r"/[\w.-]+/(edit|delete|quotas|queue|projects/new)/$", r"/X/\1/", re.sub(r"\d+", "N", bare))
            shape += "?" + ",".join(sorted(parse_qs(query)))
            shapes[shape] = shapes.get(shape, 0) + 1
            if shapes[shape] > (MAX_WORKLOAD_PAGES if shape == "/workloads/N/?" else MAX_OF_A_SHAPE):
                continue
            if query:
                variants[bare] = variants.get(bare, 0) + 1
                if variants[bare] > MAX_QUERY_VARIANTS:
                    continue
            seen.add(target)
            queue.append((target, path))
    return problems, visited


def next_link(url: str, origin) -> str | None:
    """The path (and query) to visit for a link, or None when the walk leaves it alone."""
    parts = urlsplit(url)
    if parts.scheme not in {"http", "https"} or parts.netloc != origin.netloc or SKIP.search(parts.path):
        return None
    page_numbers = parse_qs(parts.query).get("page", ["1"])
    if any(not number.isdigit() or int(number) > MAX_PAGE_NUMBER for number in page_numbers):
        return None
    return parts.path + (f"?{parts.query}" if parts.query else "")


def check_page(page, path: str, username: str, forbidden: Scope | None, problems: list[str]) -> None:
    """What holds on every page: no raw template syntax or 'None' shown, the portal's stylesheet applied, htmx
    partials answering, and the role's scope (links shown, write forms offered)."""
    text = page.inner_text("main") if page.locator("main").count() else page.inner_text("body")
    for leak in ("{{", "{%", "None", "undefined", "NaN", "Traceback"):
        if re.search(rf"(?<![\w-]){re.escape(leak)}(?![\w-])", text):
            line = next(line for line in text.splitlines() if leak in line)
            problems.append(f"{path}: shows {leak!r}: {line.strip()[:160]}")
    if not page.locator("link[rel=stylesheet][href*='/static/']").count():
        problems.append(f"{path}: no portal stylesheet")
    # At 1400 px every table fits its box: nothing the page lists hides off to the right.
    for overflow in page.eval_on_selector_all(".table-wrap", """els => els
            .filter(e => e.scrollWidth > e.clientWidth + 1)
            .map(e => (e.querySelector('table') || e).className + ' ' + e.scrollWidth + '>' + e.clientWidth)"""):
        problems.append(f"{path}: a table wider than its box at 1400 px: {overflow}")
    for partial in page.eval_on_selector_all("[hx-get]", "els => els.map(e => e.getAttribute('hx-get'))"):
        answer = page.request.get(urljoin(page.url, partial), headers={"HX-Request": "true"})
        if answer.status >= 400:
            problems.append(f"{path}: htmx partial {partial} answered {answer.status}")
    hrefs = page.eval_on_selector_all("a[href]", "links => links.map(a => a.getAttribute('href'))")
    if forbidden is not None:
        for href in hrefs:
            if forbidden.links.search(href):
                problems.append(f"{path}: {username} is shown a link to another department: {href}")
        if match := forbidden.text.search(text):
            problems.append(f"{path}: {username} is shown another department's project, queue or namespace: "
                            f"{match[0]}")
        cells = page.eval_on_selector_all(
            "main a, main td, main th, main dt, main dd, main strong, main h1, main h2, main h3, main option",
            "els => els.map(e => e.textContent.trim())")
        for label in sorted(forbidden.labels.intersection(cells)):
            problems.append(f"{path}: {username} is shown another department's project {label}")
        options = page.eval_on_selector_all(
            "select option", "els => els.map(o => [o.closest('select').name, o.value, o.textContent.trim()])")
        for name, value, label in options:
            if ("department" in name and value in forbidden.departments) or (
                    "department" not in name and "project" in name and value in forbidden.projects):
                problems.append(f"{path}: {username} may choose another department's {name}: {label}")
    if username == "viewer":
        for href in hrefs:
            target = urlsplit(urljoin(page.url, href)).path
            if WRITE_LINK.search(target) and not VIEWER_OWN_FORMS.search(target):
                problems.append(f"{path}: the viewer is offered a write link: {href}")
        # The confirmation dialog's form posts only where a data-confirm link leads (those links are checked above).
        posts = page.eval_on_selector_all(
            "form[method=post]:not(.confirm-form), form[method=POST]:not(.confirm-form), [hx-post]",
            "els => els.map(e => e.getAttribute('action') || e.getAttribute('hx-post') || location.pathname)")
        for action in posts:
            if not VIEWER_OWN_FORMS.search(urlsplit(urljoin(page.url, action)).path):
                problems.append(f"{path}: the viewer is offered a form posting to {action}")


def test_every_page_each_role_reaches_works_and_stays_in_scope(journey_data, login):
    """One walk per role on one set of data (the setup is the slow part); every role's problems reported."""
    report = []
    for username in ROLES:
        page = login(username)
        page.set_viewport_size({"width": 1400, "height": 900})
        started = time.monotonic()
        problems, visited = walk(page, username, forbidden_links(username, journey_data))
        page.context.close()
        if visited < MIN_PAGES:
            problems.append(f"reached only {visited} pages")
        if problems:
            report.append(f"{username} ({visited} pages in {time.monotonic() - started:.0f} s):")
            report += [f"  {problem}" for problem in problems]
    assert not report, "\n".join(dict.fromkeys(report))
