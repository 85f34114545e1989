"""The demo's workload templates (README, Quick start): one per kind, on the demo organisation's pools and priority
classes, so the submit forms' "Start from template" has something to offer."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction

from apps.org.demo import seed_demo

from . import services
from .models import Kind, WorkloadTemplate

TEMPLATES: list[dict[str, Any]] = [
    {"name": "bert-finetune", "kind": Kind.TRAINING,
     "description": "Fine-tune BERT on two H100 cards, preemptible.",
     "values": {"image": "nvcr.io/nvidia/pytorch:24.05-py3", "gpus": 2, "cpu": 8, "memory_gib": 64,
                "node_pool": "h100", "priority_class": "train", "command": ["python", "finetune.py"],
                "args": ["--model", "bert-base-uncased", "--epochs", "3"], "model_label": "bert-base",
                "data_class": "public"}},
    {"name": "jupyter-pytorch", "kind": Kind.NOTEBOOK,
     "description": "A PyTorch notebook on a shared L40S slice; stopped after an idle hour.",
     "values": {"image": "quay.io/jupyter/pytorch-notebook:latest", "gpus": 1, "cpu": 4, "memory_gib": 16,
                "node_pool": "l40s-shared", "priority_class": "interactive-preemptible",
                "notebook_idle_timeout_minutes": 60, "model_label": "exploration", "data_class": "internal"}},
    {"name": "nightly-eval", "kind": Kind.BATCH,
     "description": "Eight evaluation shards, four at a time, on A100 MIG slices.",
     "values": {"image": "nvcr.io/nvidia/pytorch:24.05-py3", "gpus": 1, "cpu": 2, "memory_gib": 16,
                "node_pool": "a100-mig-3g40gb", "priority_class": "train", "completions": 8, "parallelism": 4,
                "command": ["python", "evaluate.py"], "model_label": "eval-suite", "data_class": "internal"}},
]


def seed_demo_templates() -> list[WorkloadTemplate]:
    """The demo's templates, created by the demo admin (audited) where none of that name exists yet."""
    admin = get_user_model().objects.get(username="admin")
    with transaction.atomic():
        for spec in TEMPLATES:
            if not WorkloadTemplate.objects.filter(name=spec["name"]).exists():
                services.workload_template_create(actor=admin, **spec)
    return list(WorkloadTemplate.objects.filter(name__in=[spec["name"] for spec in TEMPLATES]).order_by("name"))


__all__ = ["TEMPLATES", "seed_demo", "seed_demo_templates"]
