"""Every task name the apps can send resolves to a task the worker registers.

The apps never import `worker` (the top of the stack): they name its Celery tasks by string. By convention each name
is a module constant ending in `_TASK` (`SUBMIT_TASK = "worker.tasks.workload_submit"`), and every call that sends a
task passes one: `apps.core.tasks.enqueue_now` / `enqueue_on_commit`, `apps.core.intents.intent_record(task=...)`,
Celery's `send_task`. This test reads the apps' source: it collects the constants, checks that every sending call
passes one (or forwards its own parameter, as those helpers do) and that no task name hides in another string, then
resolves each name against the Celery app once `worker.tasks` is imported.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import apps
import worker.tasks  # noqa: F401 - registers the worker's tasks
from portal.celery import app as celery_app

APPS = Path(apps.__file__).parent
# The calls that send a task: the keyword its name goes in, and its position when given positionally.
SENDERS = {"enqueue_now": ("name", 0), "enqueue_on_commit": ("name", 0), "send_task": ("name", 0),
           "intent_record": ("task", None)}
TASK_NAME = re.compile(r"worker(\.\w+)+")


def sources() -> Iterator[tuple[Path, ast.Module]]:
    for path in sorted(APPS.rglob("*.py")):
        if "migrations" not in path.parts:
            yield path, ast.parse(path.read_text(), filename=str(path))


def declared() -> dict[str, str]:
    """Every module constant `*_TASK = "<a string>"` of the apps, by name (a name declared twice must agree)."""
    names: dict[str, str] = {}
    for path, tree in sources():
        for node in tree.body:
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) \
                    and isinstance(node.value.value, str):
                for target in node.targets:
                    if isinstance(target, ast.Name) and target.id.endswith("_TASK"):
                        assert names.setdefault(target.id, node.value.value) == node.value.value, (path, target.id)
    return names


def _identifier(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    return node.attr if isinstance(node, ast.Attribute) else None


def sent() -> tuple[set[str], list[str]]:
    """The constants the apps' sending calls pass, and every call that passes something else (path:line)."""
    constants: set[str] = set()
    unnamed: list[str] = []

    def visit(node: ast.AST, parameters: frozenset[str], path: Path) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            arguments = node.args
            parameters |= {arg.arg for arg in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]}
        if isinstance(node, ast.Call) and (called := _identifier(node.func)) in SENDERS:
            keyword, position = SENDERS[called]
            given = next((k.value for k in node.keywords if k.arg == keyword), None)
            if given is None and position is not None and len(node.args) > position:
                given = node.args[position]
            name = _identifier(given) if given is not None else None
            if name is not None and name.endswith("_TASK"):
                constants.add(name)
            elif not (isinstance(given, ast.Name) and given.id in parameters):
                unnamed.append(f"{path.relative_to(APPS.parent)}:{node.lineno}")
        for child in ast.iter_child_nodes(node):
            visit(child, parameters, path)

    for path, tree in sources():
        visit(tree, frozenset(), path)
    return constants, unnamed


def test_every_sending_call_names_its_task_with_a_task_constant():
    constants, unnamed = sent()
    assert constants, "the apps send tasks: the search found none"
    assert unnamed == [], "pass a *_TASK constant as the task's name"
    assert sorted(constants - set(declared())) == [], "each *_TASK passed is a string constant of the apps"


def test_no_task_name_hides_outside_a_task_constant():
    names = set(declared().values())
    stray = [f"{path.relative_to(APPS.parent)}:{node.lineno}" for path, tree in sources() for node in ast.walk(tree)
             if isinstance(node, ast.Constant) and isinstance(node.value, str) and TASK_NAME.fullmatch(node.value)
             and node.value not in names]
    assert stray == []


def test_every_task_constant_names_a_registered_task():
    names = declared()
    assert names, "the apps declare their task names as *_TASK constants: the search found none"
    unknown = {constant: name for constant, name in names.items() if name not in celery_app.tasks}
    assert unknown == {}


def test_every_task_beat_sends_is_registered():
    from django.conf import settings

    unknown = {entry: spec["task"] for entry, spec in settings.CELERY_BEAT_SCHEDULE.items()
               if spec["task"] not in celery_app.tasks}
    assert "workload-tallies-fold" in settings.CELERY_BEAT_SCHEDULE
    assert unknown == {}
