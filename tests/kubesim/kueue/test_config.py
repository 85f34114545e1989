"""KueueConfig parsing of the Kueue Configuration subset."""

from __future__ import annotations

import pytest

from kubesim.kueue import KueueConfig


def test_defaults_are_the_portal_setup():
    cfg = KueueConfig.default()
    assert cfg.fair_sharing is True
    assert cfg.preemption_strategies == ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]
    assert cfg.quota_check_strategy == "IgnoreUndeclared"
    assert cfg.wait_for_pods_ready.enable is False


def test_from_dict():
    cfg = KueueConfig.from_dict(
        {
            "fairSharing": {"preemptionStrategies": ["LessThanInitialShare"]},
            "waitForPodsReady": {
                "enable": True,
                "timeout": "5m",
                "recoveryTimeout": "0s",
                "requeuingStrategy": {"timestamp": "Creation", "backoffLimitCount": 3, "backoffBaseSeconds": 10},
            },
            "resources": {"quotaCheckStrategy": "BlockUndeclared"},
        }
    )
    assert cfg.preemption_strategies == ["LessThanInitialShare"]
    w = cfg.wait_for_pods_ready
    assert (w.enable, w.timeout_seconds, w.recovery_timeout_seconds) == (True, 300, None)
    assert (w.requeuing_timestamp, w.backoff_limit_count, w.backoff_base_seconds, w.backoff_max_seconds) == (
        "Creation",
        3,
        10,
        3600,
    )
    assert cfg.quota_check_strategy == "BlockUndeclared"
    assert KueueConfig.from_dict({"fairSharing": None}).fair_sharing is False
    assert KueueConfig.from_dict({"waitForPodsReady": {"timeout": "1h30m"}}).wait_for_pods_ready.timeout_seconds == 5400


def test_from_dict_rejects_unknown_values():
    with pytest.raises(ValueError):
        KueueConfig.from_dict({"fairSharing": {"preemptionStrategies": ["Nope"]}})
    with pytest.raises(ValueError):
        KueueConfig.from_dict({"waitForPodsReady": {"timeout": "soon"}})


def test_integrations_frameworks():
    from kubesim.kueue.config import EMULATED_FRAMEWORKS
    from kubesim.kueue.integrations import KINDS

    lws = "leaderworkerset.x-k8s.io/leaderworkerset"
    assert KueueConfig.default().frameworks == list(EMULATED_FRAMEWORKS)
    assert list(EMULATED_FRAMEWORKS) == [
        "batch/job",
        "jobset.x-k8s.io/jobset",
        "trainer.kubeflow.org/trainjob",
        "kubeflow.org/pytorchjob",
        "ray.io/rayjob",
        "ray.io/raycluster",
        "pod",
        lws,
    ]
    assert set(KINDS) | {"pod", lws} == set(EMULATED_FRAMEWORKS)  # pods and LWS groups are not suspended jobs
    assert KueueConfig.from_dict({"fairSharing": None}).frameworks == list(EMULATED_FRAMEWORKS)  # absent: kept
    every = ["batch/job", "jobset.x-k8s.io/jobset", "trainer.kubeflow.org/trainjob", "ray.io/rayjob", "pod"]
    assert KueueConfig.from_dict({"integrations": {"frameworks": every}}).frameworks == every
    with pytest.raises(ValueError, match="unsupported"):
        KueueConfig.from_dict({"integrations": {"frameworks": ["batch/job", "jobset"]}})
    with pytest.raises(ValueError, match="duplicate"):
        KueueConfig.from_dict({"integrations": {"frameworks": ["batch/job", "batch/job"]}})
