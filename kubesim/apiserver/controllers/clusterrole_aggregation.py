"""The clusterrole-aggregation controller: a ClusterRole with an aggregationRule holds the rules of every other
ClusterRole one of its clusterRoleSelectors selects (selectors in order, the selected roles by name, each rule once),
rewritten whenever those change, as kube-controller-manager's controller keeps `admin`, `edit` and `view`
(kubesim.apiserver.auth.bootstrap_policy). Chains settle: `view` is labelled into `edit`, `edit` into `admin`.
"""

from __future__ import annotations

from datetime import datetime

from kubesim.kernel.selectors import selector_matches
from kubesim.kernel.store import Store, clone


def aggregated_rules(role: dict, roles: list[dict]) -> list[dict]:
    rules: list[dict] = []
    by_name = sorted(roles, key=lambda r: r["metadata"]["name"])
    for selector in (role.get("aggregationRule") or {}).get("clusterRoleSelectors") or []:
        if not isinstance(selector, dict):
            continue
        for other in by_name:
            if other["metadata"]["name"] == role["metadata"]["name"]:
                continue
            if not selector_matches(selector, other["metadata"].get("labels") or {}):
                continue
            rules.extend(r for r in other.get("rules") or [] if r not in rules)
    return rules


class ClusterRoleAggregationController:
    name = "clusterrole-aggregation-controller"

    def __init__(self) -> None:
        self._seen = -1

    def reconcile(self, store: Store) -> bool:
        version = store.last_change("clusterroles")
        if version == self._seen:
            return False
        roles = store.list("clusterroles", copy=False)
        wrote = False
        for role in roles:
            if not isinstance(role.get("aggregationRule"), dict) or role["metadata"].get("deletionTimestamp"):
                continue
            want = aggregated_rules(role, roles)
            if want != (role.get("rules") or []):
                updated = clone(role)
                updated["rules"] = want
                store.update("clusterroles", updated)
                wrote = True
        self._seen = -1 if wrote else store.last_change("clusterroles")
        return wrote

    def next_deadline(self, store: Store) -> datetime | None:
        return None
