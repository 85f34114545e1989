"""The admission stamp of who submitted work (deploy/admission/submitted-by.yaml) applied to kubesim: a Job created
as a Kubernetes user (kubectl --as) carries the user's name, whatever the manifest claimed, and the watcher
attributes the mirrored workload to the portal user of that name."""

from pathlib import Path

import pytest
import yaml
from kubernetes import client as k8s

from apps.core.kueue_names import SUBMITTED_BY_ANNOTATION
from tests.worker.conftest import wait_for
from tests.worker.test_watcher_outside import batch_job, outside

pytestmark = pytest.mark.slow

POLICY = Path(__file__).resolve().parents[2] / "deploy" / "admission" / "submitted-by.yaml"


def batch_as(kubesim, user):
    """The batch API as `user`, as `kubectl --as=<user>` asks it (the admin impersonating)."""
    api_client = kubesim.api_client()
    api_client.set_default_header("Impersonate-User", user)
    return k8s.BatchV1Api(api_client)


@pytest.fixture
def stamped(kubesim):
    for obj in yaml.safe_load_all(POLICY.read_text()):
        kubesim.apply(obj)
    yield
    api = k8s.CustomObjectsApi(kubesim.api_client())
    for plural in ("mutatingadmissionpolicybindings", "mutatingadmissionpolicies"):
        api.delete_cluster_custom_object("admissionregistration.k8s.io", "v1beta1", plural, "gpu-portal-submitted-by")


def test_a_job_created_as_a_user_is_stamped_and_attributed_to_that_portal_user(kubesim, org, stamped, watcher):
    created = batch_as(kubesim, "alice").create_namespaced_job("proj-vision", batch_job("as-alice", pods=1, gpus=1))
    assert created.metadata.annotations == {SUBMITTED_BY_ANNOTATION: "alice"}
    # A manifest claiming someone else is stamped with who created it.
    claimed = batch_job("claims-alice", pods=1, gpus=1, annotations={SUBMITTED_BY_ANNOTATION: "alice"})
    created = batch_as(kubesim, "system:serviceaccount:ci:runner").create_namespaced_job("proj-vision", claimed)
    assert created.metadata.annotations == {SUBMITTED_BY_ANNOTATION: "system:serviceaccount:ci:runner"}

    mine = wait_for(lambda: outside("as-alice"))
    assert mine.owner.username == "alice"
    stranger = wait_for(lambda: outside("claims-alice"))
    assert stranger.owner is None
    assert stranger.submitter_label == "outside the portal (system:serviceaccount:ci:runner)"


def test_namespaces_of_no_project_are_not_stamped(kubesim, org, stamped):
    k8s.CoreV1Api(kubesim.api_client()).create_namespace({"metadata": {"name": "team-y"}})
    created = batch_as(kubesim, "alice").create_namespaced_job("team-y", batch_job("elsewhere", namespace="team-y"))
    assert not created.metadata.annotations
