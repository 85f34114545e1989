"""LeaderWorkerSets run as groups of pods (kubesim.apiserver.controllers.lws_controller): a new template replaces the
groups of the older revision whole, the highest index first, never more than maxUnavailable unready at once, and
updatedReplicas counts the groups of the current revision."""

from __future__ import annotations

from types import SimpleNamespace

from kubernetes import client

from kubesim.testing import InProcessKubesim

LWS = ("leaderworkerset.x-k8s.io", "v1")


def leaderworkerset(name: str, *, replicas: int, size: int, image: str) -> dict:
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "leaderWorkerTemplate": {"size": size, "workerTemplate": {"spec": {"containers": [
                {"name": "main", "image": image, "ports": [{"containerPort": 8000}]}]}}},
            "rolloutStrategy": {"type": "RollingUpdate",
                                "rollingUpdateConfiguration": {"maxSurge": 0, "maxUnavailable": 1}},
        },
    }


def test_a_new_image_replaces_the_groups_one_at_a_time(api: SimpleNamespace, ns: str, ks: InProcessKubesim):
    custom = client.CustomObjectsApi(api.client)
    custom.create_namespaced_custom_object(*LWS, ns, "leaderworkersets",
                                           leaderworkerset("srv", replicas=3, size=2, image="server:1"))

    def status() -> dict:
        return custom.get_namespaced_custom_object(*LWS, ns, "leaderworkersets", "srv")["status"]

    def images() -> dict[str, str]:
        return {pod.metadata.name: pod.spec.containers[0].image for pod in api.core.list_namespaced_pod(ns).items
                if pod.metadata.deletion_timestamp is None}

    def hold_all() -> None:  # a finalizer keeps a deleted pod terminating, so each step of the rollout shows
        for pod in api.core.list_namespaced_pod(ns).items:
            if pod.metadata.deletion_timestamp is None:
                api.core.patch_namespaced_pod(pod.metadata.name, ns, {"metadata": {"finalizers": ["example.com/hold"]}})

    def release_all() -> None:
        for pod in api.core.list_namespaced_pod(ns).items:
            if pod.metadata.deletion_timestamp is not None:
                api.core.patch_namespaced_pod(pod.metadata.name, ns, {"metadata": {"finalizers": None}})

    ks.advance(1)
    assert (status()["readyReplicas"], status()["updatedReplicas"]) == (3, 3)
    hold_all()
    custom.patch_namespaced_custom_object(*LWS, ns, "leaderworkersets", "srv", {"spec": {"leaderWorkerTemplate": {
        "workerTemplate": {"spec": {"containers": [{"name": "main", "image": "server:2", "ports": [
            {"containerPort": 8000}]}]}}}}})
    replaced = []
    for _ in range(3):
        ks.advance(1)
        terminating = sorted(pod.metadata.name for pod in api.core.list_namespaced_pod(ns).items
                             if pod.metadata.deletion_timestamp is not None)
        replaced.append(terminating)
        assert (status()["readyReplicas"], len(terminating)) == (2, 2)  # one group down at a time, whole
        release_all()
        ks.advance(1)
        hold_all()
    assert replaced == [["srv-2", "srv-2-1"], ["srv-1", "srv-1-1"], ["srv-0", "srv-0-1"]]  # the highest index first
    assert (status()["readyReplicas"], status()["updatedReplicas"]) == (3, 3)
    assert set(images().values()) == {"server:2"} and len(images()) == 6
    assert {c["type"]: c["status"] for c in status()["conditions"]} == {"Available": "True", "Progressing": "False"}
