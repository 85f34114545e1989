"""--state in a real subprocess: a restart keeps objects, the resourceVersion counter and the clock."""

from __future__ import annotations

from kubernetes import client

from kubesim.testing import KubesimProcess
from tests.kubesim.conftest import KUEUE, cluster_queue, job_body


def test_restart_keeps_cluster(tmp_path):
    state = str(tmp_path / "state.json")
    with KubesimProcess(str(tmp_path), "--state", state) as first:
        api = first.api_client()
        core, batch, custom = client.CoreV1Api(api), client.BatchV1Api(api), client.CustomObjectsApi(api)
        core.create_namespace({"metadata": {"name": "keep"}})
        batch.create_namespaced_job("keep", job_body("long", command="sleep 100"))
        custom.create_cluster_custom_object(*KUEUE, "clusterqueues", cluster_queue("kept-cq"))
        first.advance(40)
        uid = batch.read_namespaced_job("long", "keep").metadata.uid
        rv = int(core.list_namespace().metadata.resource_version)
        time_before = first.healthz()["time"]
        api.close()
    with KubesimProcess(str(tmp_path), "--state", state) as second:
        api = second.api_client()
        core, batch, custom = client.CoreV1Api(api), client.BatchV1Api(api), client.CustomObjectsApi(api)
        assert second.healthz()["time"] == time_before
        assert batch.read_namespaced_job("long", "keep").metadata.uid == uid
        assert custom.get_cluster_custom_object(*KUEUE, "clusterqueues", "kept-cq")["spec"]["queueingStrategy"]
        assert len(core.list_node().items) == 16  # restored, not bootstrapped twice
        created = core.create_namespace({"metadata": {"name": "after"}})
        assert int(created.metadata.resource_version) > rv
        second.advance(60)  # the pod keeps its start time across the restart: 40 + 60 >= 100
        assert batch.read_namespaced_job("long", "keep").status.succeeded == 1
        api.close()
