"""Kueue's job integrations (upstream pkg/controller/jobs/<kind>), one module per integrated kind: a controller that
gives each queued job a Workload, starts the job when Kueue admits it and stops it on eviction, and reports it
Finished. The kind's admission webhook has the same module name in kubesim.kueue.webhooks.

- `batch_job.py`: batch/v1 Job (`JobIntegration`, upstream pkg/controller/jobs/job with jobframework's reconciler).

Another kind (JobSet, TrainJob, RayJob, LeaderWorkerSet, pod groups) is a module here and one in
kubesim.kueue.webhooks, each added to the list below and to `kueue_webhooks`. The kind-independent part of
`batch_job.py` (jobframework: Workload naming and creation, start and stop on admission and eviction, Finished)
then moves to a module of its own that both integrations use.
"""

from __future__ import annotations

from kubesim.kernel.protocols import Controller
from kubesim.kueue.integrations.batch_job import JobIntegration
from kubesim.kueue.state import KueueState


def integration_controllers(state: KueueState) -> list[Controller]:
    """One controller per integrated job kind."""
    return [JobIntegration(state)]
