"""Kueue's job integrations (upstream pkg/controller/jobs/<kind>), on the shared jobframework.

- `jobframework.py`: the reconciler every kind shares (Workload creation and matching, start and stop on admission
  and eviction, quota release, PodsReady, reclaimable pods, Finished, managed ancestors).
- `orphans.py`: `OrphanedWorkloads`, a Workload whose owner is gone is finished with OwnerNotFound.
- `podsets.py`: Workload names and what Kueue writes into pod templates on start and restores on stop.
- `batch_job.py`: batch/v1 Job (framework `batch/job`).
- `jobset.py`: jobset.x-k8s.io/v1alpha2 JobSet (framework `jobset.x-k8s.io/jobset`).
- `trainjob.py`: Kubeflow Trainer v2 trainer.kubeflow.org/v1alpha1 TrainJob (framework `trainer.kubeflow.org/trainjob`).
- `pytorchjob.py`: Kubeflow training-operator kubeflow.org/v1 PyTorchJob (framework `kubeflow.org/pytorchjob`).
- `raycluster.py`, `rayjob.py`: ray.io/v1 RayCluster and RayJob (frameworks `ray.io/raycluster`, `ray.io/rayjob`).
- `pod.py`: plain pods and pod groups (framework `pod`), not a JobKind: one Workload per pod or per group, pods held
  by a scheduling gate; the LeaderWorkerSet integration enables it implicitly for its pods.
- `leaderworkerset.py`: leaderworkerset.x-k8s.io/v1 LeaderWorkerSet (framework
  `leaderworkerset.x-k8s.io/leaderworkerset`): a prebuilt Workload per group, its pods a serving pod group.

A kind is a JobKind (its pod sets, suspension, activity, outcome, readiness) listed in KINDS under its framework name;
its webhook has the same module name in kubesim.kueue.webhooks. A kind acts only when the Configuration's
`integrations.frameworks` names it (kubesim.kueue.config).
"""

from __future__ import annotations

from kubesim.kernel.protocols import Controller
from kubesim.kueue.integrations.batch_job import BatchJob
from kubesim.kueue.integrations.jobframework import JobKind, JobReconciler
from kubesim.kueue.integrations.jobset import JobSet
from kubesim.kueue.integrations.leaderworkerset import FRAMEWORK as LWS
from kubesim.kueue.integrations.leaderworkerset import LeaderWorkerSetReconciler
from kubesim.kueue.integrations.orphans import OrphanedWorkloads
from kubesim.kueue.integrations.pod import FRAMEWORK as POD
from kubesim.kueue.integrations.pod import PodReconciler
from kubesim.kueue.integrations.pytorchjob import PyTorchJob
from kubesim.kueue.integrations.raycluster import RayCluster
from kubesim.kueue.integrations.rayjob import RayJob
from kubesim.kueue.integrations.trainjob import TrainJob
from kubesim.kueue.state import KueueState

_EMULATED: tuple[JobKind, ...] = (BatchJob(), JobSet(), TrainJob(), PyTorchJob(), RayCluster(), RayJob())
KINDS: dict[str, JobKind] = {k.framework: k for k in _EMULATED}
"""framework name -> kind, for the integrations kubesim emulates."""


def enabled_kinds(frameworks: list[str]) -> list[JobKind]:
    return [KINDS[name] for name in frameworks if name in KINDS]


def integration_controllers(state: KueueState) -> list[Controller]:
    """One reconciler per enabled kind, then the orphaned-Workload pass."""
    kinds = enabled_kinds(state.config.frameworks)
    frameworks = state.config.frameworks
    groups: list[Controller] = [LeaderWorkerSetReconciler(state)] if LWS in frameworks else []
    if POD in frameworks or LWS in frameworks:  # LWS enables the pod integration implicitly, for its pods only
        groups.append(PodReconciler(state, parent_suspended_only=POD not in frameworks))
    return [*(JobReconciler(state, kind, kinds) for kind in kinds), *groups, OrphanedWorkloads(state, kinds)]
