"""What notebook servers say of their own activity: Jupyter's `/api/status` (`started`, `last_activity`), read
through the API server's service proxy with the notebook's token.

The culler (tasks.notebooks_cull_idle) compares what a server reports with what it reported last time instead of
with the portal's clock, so a cluster whose clock differs from the portal's (kubesim's manual clock, a skewed node)
cannot make a notebook look idle or busy: a change of `last_activity` is activity, seen at the portal's time.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from apps.workloads import notebooks
from apps.workloads.models import Workload

from .gateway import ClusterError, Gateway

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServerStatus:
    """A server's own report: when it started and when it last saw use (its clock, kept as text)."""

    started: str
    last_activity: str

    @property
    def used_since_start(self) -> bool:
        return bool(self.last_activity) and self.last_activity != self.started


def read_server_activity(gw: Gateway, workloads: Iterable[Workload]) -> dict[int, ServerStatus]:
    """One status per notebook whose server answered; a server that does not answer is left out (the culler
    then decides on what the portal knows). Raises ClusterError only when the API server itself is away."""
    found: dict[int, ServerStatus] = {}
    for workload in workloads:
        path = notebooks.service_proxy_path(workload.project.namespace, workload.pk, "api/status")
        try:
            answer: Any = gw.raw_get(path, query=[("token", notebooks.token(workload.pk))])
        except ClusterError as error:
            if error.unreachable:
                raise
            logger.info("notebook %s did not report its activity: %s", workload.pk, error.describe())
            continue
        if isinstance(answer, dict) and isinstance(answer.get("last_activity"), str):
            found[workload.pk] = ServerStatus(started=str(answer.get("started") or ""),
                                              last_activity=answer["last_activity"])
    return found
