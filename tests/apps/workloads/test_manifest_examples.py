"""The manifest page's examples: one per kind the portal submits, each passing every check as it stands, for a pool
of full cards and a pool of MIG slices, under both Pod Security profiles."""

from __future__ import annotations

import pytest

from apps.workloads.manifests import (
    BASELINE,
    EXAMPLE_KINDS,
    MANIFEST_KINDS,
    RESTRICTED,
    Target,
    check_manifest,
    example_manifest,
    parse_manifest,
)


def test_there_is_an_example_of_every_kind():
    assert set(EXAMPLE_KINDS) == set(MANIFEST_KINDS)


@pytest.mark.parametrize("profile", [BASELINE, RESTRICTED])
@pytest.mark.parametrize("gpu_resource", ["nvidia.com/gpu", "nvidia.com/mig-3g.40gb"])
@pytest.mark.parametrize("kind", EXAMPLE_KINDS)
def test_each_example_passes_every_check(kind, gpu_resource, profile):
    text = example_manifest(kind, gpu_resource=gpu_resource)
    obj = parse_manifest(text)
    target = Target(namespace="proj-vision", project_name="Vision", gpu_resource=gpu_resource, pool_name="pool",
                    profile=profile, served=frozenset(entry.kind for entry in MANIFEST_KINDS.values()))
    checked, problems = check_manifest(obj, target)
    assert problems == [] and checked is not None
    assert checked.entry.name == kind and checked.units >= 1
    assert "namespace" not in obj["metadata"] and "labels" not in obj["metadata"]


def test_an_unknown_kind_has_no_example():
    with pytest.raises(KeyError):
        example_manifest("Deployment", gpu_resource="nvidia.com/gpu")
