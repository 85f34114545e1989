"""Kueue's batch/v1 Job integration (upstream pkg/controller/jobs/job): what the jobframework needs to know of a Job.

One pod set `main` of min(parallelism, completions) pods, partial admission (kueue.x-k8s.io/job-min-parallelism:
the pod set's minCount; an admission of fewer pods lowers parallelism while the Job runs), finished on its
Complete/Failed condition, ready once ready + succeeded pods reach the admitted count, reclaimable pods once fewer
completions remain than its parallelism (Indexed Jobs count completed and failed indexes). The labels the Job
controller stamps on the template (its uid, the legacy job-name) stay out of the Workload's pod set, all but
`batch.kubernetes.io/job-name`, and are kept on the Job when its template is restored, since its selector needs them.
"""

from __future__ import annotations

from kubesim.kernel.store import clone
from kubesim.kueue import constants as C
from kubesim.kueue.integrations.podsets import PodSetInfo, merge_into, restore_template

FRAMEWORK = "batch/job"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
MANAGED_LABELS = ("job-name", "controller-uid", JOB_NAME_LABEL, "batch.kubernetes.io/controller-uid")


def pod_count(job: dict) -> int:
    spec = job.get("spec") or {}
    parallelism = spec.get("parallelism", 1)
    completions = spec.get("completions")
    return min(parallelism, completions) if completions is not None else parallelism


def _indexes_count(ranges: str, completions: int) -> int:
    """How many indexes below completions a Job's completedIndexes/failedIndexes string ("0-2,4") names."""
    seen: set[int] = set()
    for part in (ranges or "").split(","):
        first, _, last = part.strip().partition("-")
        if not first.isdigit() or (last and not last.isdigit()):
            continue
        seen.update(i for i in range(int(first), int(last or first) + 1) if i < completions)
    return len(seen)


def reclaimable_pods(job: dict) -> int:
    """Parallel slots no longer needed: parallelism minus the completions still to go, once a pod has finished."""
    spec, status = job.get("spec") or {}, job.get("status") or {}
    parallelism = int(spec.get("parallelism", 1))
    raw_completions = spec.get("completions")
    completions = parallelism if raw_completions is None else int(raw_completions)
    terminal = int(status.get("succeeded") or 0)
    if spec.get("completionMode") == "Indexed":
        terminal = _indexes_count(
            ",".join(x for x in (status.get("completedIndexes"), status.get("failedIndexes")) if x), completions
        )
    if parallelism <= 1 or terminal <= 0:
        return 0
    remaining = max(completions - terminal, 0)
    return parallelism - remaining if remaining < parallelism else 0


class BatchJob:
    """The jobframework's view of a batch/v1 Job (kubesim.kueue.integrations.jobframework.JobKind)."""

    framework = FRAMEWORK
    resource = "jobs"
    inputs: tuple[str, ...] = ()
    api_version = "batch/v1"
    kind = "Job"
    group = "batch"

    def pod_sets(self, store, job: dict) -> list[dict]:
        template = clone(job["spec"].get("template") or {})
        labels = (template.get("metadata") or {}).get("labels")
        for key in MANAGED_LABELS:
            if key != JOB_NAME_LABEL and labels:
                labels.pop(key, None)
        podset: dict = {"name": "main", "count": pod_count(job), "template": template}
        raw = (job["metadata"].get("annotations") or {}).get(C.MIN_PARALLELISM_ANNOTATION)
        if raw and raw.isascii() and raw.isdigit() and int(raw) < podset["count"]:
            podset["minCount"] = int(raw)
        return [podset]

    def suspended(self, job: dict) -> bool:
        return bool((job.get("spec") or {}).get("suspend"))

    def suspend(self, job: dict) -> None:
        job["spec"]["suspend"] = True

    def active(self, job: dict) -> bool:
        return bool((job.get("status") or {}).get("active"))

    def finished(self, job: dict) -> tuple[bool, bool, str]:
        for c in (job.get("status") or {}).get("conditions") or []:
            if c.get("type") in ("Complete", "Failed") and c.get("status") == "True":
                return True, c["type"] == "Complete", c.get("message", "")
        return False, True, ""

    def pods_ready(self, store, job: dict, wl: dict) -> bool:
        """Job.PodsReady: ready and succeeded pods (counted or not yet counted) reach the admitted count."""
        status = job.get("status") or {}
        admitted = sum(
            int(p.get("count", 0))
            for p in ((wl.get("status") or {}).get("admission") or {}).get("podSetAssignments") or []
        )
        uncounted = len((status.get("uncountedTerminatedPods") or {}).get("succeeded") or [])
        done = int(status.get("ready") or 0) + int(status.get("succeeded") or 0) + uncounted
        return done >= max(admitted, 1)

    def reclaimable_pods(self, store, job: dict) -> list[dict]:
        count = reclaimable_pods(job)
        return [{"name": "main", "count": count}] if count else []

    def run(self, job: dict, infos: list[PodSetInfo]) -> None:
        spec = job["spec"]
        if infos:
            merge_into(spec.setdefault("template", {}), infos[0])
            if infos[0].count != pod_count(job):
                spec["parallelism"] = infos[0].count
        spec["suspend"] = False

    def restore(self, job: dict, infos: list[PodSetInfo]) -> None:
        """The template as recorded (keeping the Job controller's labels), and the pod set's parallelism back when a
        partial admission lowered it."""
        if len(infos) != 1:
            return
        spec = job["spec"]
        have = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
        infos[0].labels.update({key: have[key] for key in MANAGED_LABELS if key in have})
        restore_template(spec.setdefault("template", {}), infos[0])
        annotations = job["metadata"].get("annotations") or {}
        if C.MIN_PARALLELISM_ANNOTATION in annotations and spec.get("parallelism") != infos[0].count:
            spec["parallelism"] = infos[0].count
