"""The subset of Kueue's Configuration (config.kueue.x-k8s.io/v1beta2) that kubesim honours."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from kubesim.kueue import constants as C
from kubesim.kueue.features import ADMISSION_FAIR_SHARING, parse_feature_gates
from kubesim.kueue.features import DEFAULTS as DEFAULT_GATES

# Every integration Kueue v0.20 knows (its FrameworkName constants); kubesim emulates EMULATED_FRAMEWORKS and accepts
# the others in a Configuration without acting on them.
FRAMEWORKS = (
    "batch/job",
    "jobset.x-k8s.io/jobset",
    "trainer.kubeflow.org/trainjob",
    "kubeflow.org/pytorchjob",
    "kubeflow.org/tfjob",
    "kubeflow.org/paddlejob",
    "kubeflow.org/xgboostjob",
    "kubeflow.org/jaxjob",
    "kubeflow.org/mpijob",
    "ray.io/rayjob",
    "ray.io/raycluster",
    "ray.io/rayservice",
    "leaderworkerset.x-k8s.io/leaderworkerset",
    "pod",
    "deployment",
    "statefulset",
    "workload.codeflare.dev/appwrapper",
    "sparkoperator.k8s.io/sparkapplication",
)
EMULATED_FRAMEWORKS = (
    "batch/job",
    "jobset.x-k8s.io/jobset",
    "trainer.kubeflow.org/trainjob",
    "kubeflow.org/pytorchjob",
    "ray.io/rayjob",
    "ray.io/raycluster",
    "pod",
    "leaderworkerset.x-k8s.io/leaderworkerset",
)
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(h|ms|m|s)")
_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def parse_duration(value: str | int | float) -> float:
    """Go duration strings such as `30m`, `1h30m`, `90s` (a bare number is seconds)."""
    if isinstance(value, int | float):
        return float(value)
    parts = _DURATION.findall(value)
    if not parts or "".join(n + u for n, u in parts) != value:
        raise ValueError(f"invalid duration {value!r}")
    return sum(float(n) * _UNITS[u] for n, u in parts)


@dataclass
class WaitForPodsReady:
    """waitForPodsReady: evict admitted workloads whose pods are not ready in time, requeue with backoff."""

    enable: bool = False
    timeout_seconds: float = 1800.0
    recovery_timeout_seconds: float | None = 1800.0  # defaults to the timeout; 0s (None) disables it
    block_admission: bool = False
    requeuing_timestamp: str = "Eviction"
    backoff_limit_count: int | None = None
    backoff_base_seconds: int = 60
    backoff_max_seconds: int = 3600


@dataclass
class AdmissionFairSharing:
    """admissionFairSharing: LocalQueue usage decayed with a half-life, sampled every interval, weighted per
    resource; it orders heads inside ClusterQueues whose admissionScope asks for it."""

    usage_half_life_seconds: float = 168 * 3600.0
    usage_sampling_interval_seconds: float = 300.0
    resource_weights: dict[str, float] = field(default_factory=dict)  # a resource without a weight counts 1


def parse_frameworks(value: object) -> list[str]:
    """integrations.frameworks: names Kueue knows, each once (Kueue refuses others at start-up)."""
    if not isinstance(value, list):
        raise ValueError("integrations.frameworks must be a list of framework names")
    unknown = [name for name in value if name not in FRAMEWORKS]
    if unknown:
        raise ValueError(f"integrations.frameworks: unsupported {unknown}, supported: {list(FRAMEWORKS)}")
    repeated = sorted({name for name in value if value.count(name) > 1})
    if repeated:
        raise ValueError(f"integrations.frameworks: duplicate {repeated}")
    return list(value)


@dataclass
class KueueConfig:
    """Fair Sharing on (both preemption strategies), IgnoreUndeclared and every emulated integration by default: the
    portal's real-cluster setup."""

    fair_sharing: bool = True
    preemption_strategies: list[str] = field(
        default_factory=lambda: [C.LESS_THAN_OR_EQUAL_TO_FINAL_SHARE, C.LESS_THAN_INITIAL_SHARE]
    )
    wait_for_pods_ready: WaitForPodsReady = field(default_factory=WaitForPodsReady)
    quota_check_strategy: str = "IgnoreUndeclared"
    # kubesim's own (`kubesim.provisioningRequestDelay`): how long a ProvisioningRequest admission check stays
    # Pending before kubesim marks it Ready, standing for the time a cluster autoscaler takes to bring capacity up.
    provisioning_delay_seconds: float = 0.0
    # kubesim's own (`kubesim.provisioningRequestAutoscaler`, default true): whether kubesim stands in for the
    # cluster autoscaler, marking each ProvisioningRequest Accepted and, after the delay above, Provisioned. Off, the
    # requests' conditions are left to another client (as in Kueue's own integration tests).
    provisioning_autoscaler: bool = True
    admission_fair_sharing: AdmissionFairSharing | None = None  # None: Admission Fair Sharing is off
    # integrations.frameworks: Kueue's own default is ["batch/job"]; a cluster running the other kinds lists them
    # (docs/research/job-integrations/kueue-integrations.md, section 0).
    frameworks: list[str] = field(default_factory=lambda: list(EMULATED_FRAMEWORKS))
    # featureGates: the gates switched from Kueue v0.20's defaults (kubesim.kueue.features), by name
    feature_gates: dict[str, bool] = field(default_factory=dict)

    @classmethod
    def default(cls) -> KueueConfig:
        return cls()

    def enabled(self, gate: str) -> bool:
        """Whether a Kueue feature gate is on: as configured, else Kueue v0.20's default."""
        return self.feature_gates.get(gate, DEFAULT_GATES[gate])

    @classmethod
    def from_dict(cls, d: dict | None) -> KueueConfig:
        """Parse a Kueue Configuration document (or its subset); absent keys keep kubesim's defaults."""
        cfg = cls()
        d = d or {}
        if "fairSharing" in d:
            fs = d["fairSharing"]
            if fs is None:
                cfg.fair_sharing = False
            else:
                cfg.fair_sharing = bool(fs.get("enable", True))
                strategies = fs.get("preemptionStrategies")
                if strategies:
                    allowed = {C.LESS_THAN_OR_EQUAL_TO_FINAL_SHARE, C.LESS_THAN_INITIAL_SHARE}
                    bad = [s for s in strategies if s not in allowed]
                    if bad:
                        raise ValueError(f"unknown fairSharing.preemptionStrategies {bad}")
                    cfg.preemption_strategies = list(strategies)
        w = d.get("waitForPodsReady")
        if w is not None:
            rs = w.get("requeuingStrategy") or {}
            limit = rs.get("backoffLimitCount")
            timeout = parse_duration(w.get("timeout") or "30m")
            recovery = w.get("recoveryTimeout")
            cfg.wait_for_pods_ready = WaitForPodsReady(
                enable=bool(w.get("enable", True)),
                timeout_seconds=timeout,
                recovery_timeout_seconds=timeout if recovery is None else (parse_duration(recovery) or None),
                block_admission=bool(w.get("blockAdmission", False)),
                requeuing_timestamp=rs.get("timestamp", "Eviction"),
                backoff_limit_count=None if limit is None else int(limit),
                backoff_base_seconds=int(rs.get("backoffBaseSeconds", 60)),
                backoff_max_seconds=int(rs.get("backoffMaxSeconds", 3600)),
            )
        afs = d.get("admissionFairSharing")
        if afs is not None:
            cfg.admission_fair_sharing = AdmissionFairSharing(
                usage_half_life_seconds=parse_duration(afs.get("usageHalfLifeTime") or 0),
                usage_sampling_interval_seconds=parse_duration(afs.get("usageSamplingInterval") or "5m"),
                resource_weights={k: float(v) for k, v in (afs.get("resourceWeights") or {}).items()},
            )
        cfg.feature_gates = parse_feature_gates(d.get("featureGates"))
        if not cfg.enabled(ADMISSION_FAIR_SHARING):  # Kueue reads the configuration only with the gate on
            cfg.admission_fair_sharing = None
        integrations = d.get("integrations") or {}
        if integrations.get("frameworks") is not None:
            cfg.frameworks = parse_frameworks(integrations["frameworks"])
        own = d.get("kubesim") or {}
        if own.get("provisioningRequestDelay") is not None:
            cfg.provisioning_delay_seconds = parse_duration(own["provisioningRequestDelay"])
        if own.get("provisioningRequestAutoscaler") is not None:
            cfg.provisioning_autoscaler = bool(own["provisioningRequestAutoscaler"])
        res = d.get("resources") or {}
        if res.get("quotaCheckStrategy"):
            if res["quotaCheckStrategy"] not in ("BlockUndeclared", "IgnoreUndeclared"):
                raise ValueError(f"unknown resources.quotaCheckStrategy {res['quotaCheckStrategy']!r}")
            cfg.quota_check_strategy = res["quotaCheckStrategy"]
        return cfg
