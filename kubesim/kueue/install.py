"""What installing Kueue puts in a cluster besides its CRDs: the kueue-system namespace, the controller Deployment
(its image tag is the Kueue version) and the kueue-manager-config ConfigMap holding the Configuration kubesim runs."""

from __future__ import annotations

import yaml

from kubesim.kernel.deployments import controller_manager
from kubesim.kueue.config import KueueConfig

NAMESPACE = "kueue-system"
VERSION = "v0.20.0"  # the Kueue release kubesim emulates (kubesim/kueue/README.md)


def configuration(config: KueueConfig) -> dict:
    """config as a Kueue Configuration document (config.kueue.x-k8s.io/v1beta2)."""
    wait = config.wait_for_pods_ready
    out: dict = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": NAMESPACE,
        "manageJobsWithoutQueueName": False,
        "integrations": {"frameworks": list(config.frameworks)},
        "resources": {"quotaCheckStrategy": config.quota_check_strategy},
        "waitForPodsReady": {
            "enable": wait.enable,
            "timeout": f"{wait.timeout_seconds:g}s",
            "blockAdmission": wait.block_admission,
        },
    }
    if config.fair_sharing:
        out["fairSharing"] = {"enable": True, "preemptionStrategies": list(config.preemption_strategies)}
    return out


def installation(config: KueueConfig) -> list[tuple[str, dict]]:
    """(resource plural, object) of each object, in creation order."""
    labels = {"app.kubernetes.io/name": "kueue", "control-plane": "controller-manager"}
    container = {
        "name": "manager",
        "image": f"registry.k8s.io/kueue/kueue:{VERSION}",
        "args": ["--config=/controller_manager_config.yaml"],
    }
    deployment = controller_manager(name="kueue-controller-manager", namespace=NAMESPACE, labels=labels,
                                    container=container)
    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "kueue-manager-config", "namespace": NAMESPACE, "labels": labels},
        "data": {"controller_manager_config.yaml": yaml.safe_dump(configuration(config), sort_keys=False)},
    }
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
    return [("namespaces", namespace), ("deployments", deployment), ("configmaps", config_map)]
