"""Helpers for the workload page tests: form payloads from the demo organisation, errors read off the page."""

from __future__ import annotations

import html
import re
import secrets
from typing import Any

from apps.org.models import NodePool, PriorityClass, Project


def submit_payload(kind: str = "training", *, project: str = "vision", pool: str = "h100",
                   priority_class: str = "train", **overrides: Any) -> dict[str, Any]:
    """A valid POST for the submit form of `kind`, with a fresh submission token (as each rendered form has);
    overrides replace fields (None drops one)."""
    data: dict[str, Any] = {
        "submission_token": secrets.token_urlsafe(24),
        "project": Project.objects.get(slug=project).pk, "name": f"my-{kind}", "image": "pytorch/pytorch:2.4.0",
        "node_pool": NodePool.objects.get(slug=pool).pk, "gpus": "1", "cpu": "2", "memory_gib": "16",
        "priority_class": PriorityClass.objects.get(name=priority_class).pk, "preemptible": "on",
        "model_label": "resnet50", "data_class": "public",
    }
    if kind in ("training", "batch"):
        data.update({"command": "python train.py", "args": "--epochs 1", "env": "WANDB_MODE=offline",
                     "max_runtime_minutes": ""})
    if kind == "training":
        data["pods"] = "1"
    if kind == "batch":
        data.update({"completions": "4", "parallelism": "2"})
    if kind == "notebook":
        data.update({"image": "jupyter/base-notebook:latest", "notebook_idle_timeout_minutes": "60",
                     "notebook_port": "8888"})
    return overridden(data, overrides)


def overridden(data: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """The form data with each override applied: a value replaces the field's, None leaves the field out."""
    for key, value in overrides.items():
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
    return data


def field_errors(response: Any, field: str) -> str:
    """The error text rendered next to a form field (empty when there is none)."""
    content = response.content.decode()
    match = re.search(rf'<ul class="errorlist" id="id_{field}_errors"[^>]*>(.*?)</ul>', content, re.S)
    return html.unescape(re.sub(r"<[^>]+>", " ", match.group(1))) if match else ""


def all_errors(response: Any) -> str:
    content = response.content.decode()
    return html.unescape(" ".join(re.findall(r'<ul class="errorlist[^"]*"[^>]*>(.*?)</ul>', content, re.S)))


def preemptible_checked(content: str) -> bool:
    tag = re.search(r'<input type="checkbox" name="preemptible"[^>]*>', content)
    assert tag, "no preemptible box on the page"
    return " checked" in tag.group(0)
