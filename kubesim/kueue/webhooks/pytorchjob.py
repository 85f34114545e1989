"""Kueue's PyTorchJob webhook (upstream jobframework's base webhook for the kubeflow jobs), mpytorchjob.kb.io /
vpytorchjob.kb.io: the jobframework's defaults (spec.runPolicy.suspend for a PyTorchJob that names a queue) and its
label and annotation rules. Refusals answer 403 under vpytorchjob.kb.io. TopologyAwareScheduling's annotation checks
are not emulated (kubesim has no TAS)."""

from __future__ import annotations

from kubesim.kueue.webhooks.common import as_dict
from kubesim.kueue.webhooks.jobframework import JobFrameworkWebhook


class PyTorchJobWebhook(JobFrameworkWebhook):
    resource = "pytorchjobs"
    name = "vpytorchjob.kb.io"
    gvk = "kubeflow.org/v1, Kind=PyTorchJob"

    def suspended(self, obj: dict) -> bool:
        return as_dict(as_dict(obj.get("spec")).get("runPolicy")).get("suspend") is True

    def suspend(self, obj: dict) -> None:
        obj.setdefault("spec", {}).setdefault("runPolicy", {})["suspend"] = True
