"""The one rule for rows whose values wait sealed until the worker writes their Secret (credentials, pull secrets):
written -> values forgotten; replaced meanwhile -> the newer values wait for their own write; failed -> the error is
kept and the values stay."""

from __future__ import annotations

import pytest

from apps.core.services import sealed_secret_applied
from apps.org import services as org_services
from apps.org.models import ImagePullSecret, Project
from apps.workloads import services as workload_services
from apps.workloads.models import Credential

pytestmark = pytest.mark.django_db


def rows(demo):
    vision = Project.objects.get(slug="vision")
    credential = workload_services.credential_create(actor=demo["alice"], project=vision, name="wandb",
                                                     values={"WANDB_API_KEY": "k1"})
    pull = org_services.pull_secret_create(actor=demo["admin"], project=vision, name="nvcr", registry="nvcr.io",
                                           username="$oauthtoken", password="p1")
    return [(Credential, credential.pk), (ImagePullSecret, pull.pk)]


def test_written_values_are_forgotten_failures_kept_and_newer_values_wait(demo):
    for model, pk in rows(demo):
        first = model.objects.get(pk=pk).sealed
        assert first
        sealed_secret_applied(model=model, pk=pk, sealed="", error="cannot reach the cluster at https://k8s")
        row = model.objects.get(pk=pk)
        assert row.sealed == first and row.apply_error == "cannot reach the cluster at https://k8s"
        assert row.applied_at is None
        model.objects.filter(pk=pk).update(sealed="newer")  # replaced while the worker wrote `first`
        sealed_secret_applied(model=model, pk=pk, sealed=first)
        assert model.objects.get(pk=pk).sealed == "newer"
        sealed_secret_applied(model=model, pk=pk, sealed="newer")
        row = model.objects.get(pk=pk)
        assert (row.sealed, row.apply_error) == ("", "") and row.applied_at is not None
