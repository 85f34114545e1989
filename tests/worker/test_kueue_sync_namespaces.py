"""The reconcile adopts no namespace it did not create: a project whose namespace exists without the portal's label,
belongs to another project, or breaks the namespace rule (a row older than the rule) is left out and reported on
the sync run, nothing in that namespace is created, changed or deleted, and every other project is reconciled, on
this run and the later ones."""

from decimal import Decimal

import pytest
from django.core.management import CommandError, call_command
from kubernetes import client as k8s

from apps.org import services
from apps.org.models import Department, KueueSyncRun, NodePool, Project, Quota
from worker import tasks
from worker.gateway import ClusterError
from worker.kueue_sync import PROJECT_LABEL, SyncResult, _guarded, desired_from_database, read_owned, reconcile

ALL_OBJECTS = 115  # the demo organisation's objects (tests/worker/test_kueue_sync.py)
SPEECH_OBJECTS = 6  # namespace, project cohort, two ClusterQueues, two LocalQueues on l40s-shared


@pytest.fixture
def core(kubesim):
    """The official client straight at kubesim, as a cluster admin or another tool would create a namespace."""
    return k8s.CoreV1Api(kubesim.api_client())


def speech(demo) -> Project:
    project = services.project_create(actor=demo["admin"], department=Department.objects.get(slug="research"),
                                      slug="speech", name="Speech")
    services.quota_set(actor=demo["admin"], node_pool=NodePool.objects.get(slug="l40s-shared"), project=project,
                       deserved=0, limit=4)
    return project


def speech_objects(cluster) -> list[str]:
    """Every object of the speech project anywhere in the cluster, owned or not, besides its namespace."""
    found = [f"ClusterQueue {cq['metadata']['name']}" for cq in cluster.list("ClusterQueue")
             if cq["metadata"]["name"].startswith("proj-speech-")]
    found += [f"Cohort {c['metadata']['name']}" for c in cluster.list("Cohort")
              if c["metadata"]["name"].startswith("proj-speech-")]
    found += [f"LocalQueue {q['metadata']['namespace']}/{q['metadata']['name']}" for q in cluster.list("LocalQueue")
              if q["metadata"]["namespace"] == "proj-speech"]
    return found


def weight(cluster, cohort: str) -> str:
    return str(cluster.get("Cohort", cohort)["spec"]["fairSharing"]["weight"])


def set_weight(demo, project: str, value: str) -> None:
    quota = Quota.objects.get(project__slug=project, node_pool__slug="h100")
    services.quota_update(actor=demo["lead"], quota=quota, over_quota_weight=Decimal(value))


def test_a_foreign_namespace_is_never_adopted_and_the_rest_reconciles(demo, cluster, core):
    foreign = core.create_namespace({"metadata": {"name": "proj-speech", "labels": {"team": "speech-infra"}}})
    speech(demo)
    first = reconcile(cluster, desired_from_database())
    # Everything but the speech project is created.
    assert len(first.changes) == ALL_OBJECTS and all(change.startswith("created ") for change in first.changes)
    assert not [change for change in first.changes if "speech" in change]
    assert first.project_errors == [
        "Project speech: namespace proj-speech exists in the cluster without the portal's label "
        "app.kubernetes.io/managed-by=gpu-portal; the portal does not adopt namespaces it did not create, so it "
        "leaves the namespace and this project's queues alone. Delete that namespace in the cluster if it is "
        "unused, or recreate the project with another namespace."]
    assert speech_objects(cluster) == []
    after = core.read_namespace("proj-speech")
    assert after.metadata.labels == foreign.metadata.labels
    assert after.metadata.resource_version == foreign.metadata.resource_version

    # Later runs keep reconciling the others and keep reporting speech.
    set_weight(demo, "vision", "3")
    second = reconcile(cluster, desired_from_database())
    assert second.changes == ["updated Cohort proj-vision-h100"] and weight(cluster, "proj-vision-h100") == "3"
    assert second.project_errors == first.project_errors
    assert core.read_namespace("proj-speech").metadata.resource_version == foreign.metadata.resource_version

    # Once the cluster's admins remove their namespace, the portal creates its own.
    core.delete_namespace("proj-speech")
    third = reconcile(cluster, desired_from_database())
    assert third.project_errors == []
    assert len(third.changes) == SPEECH_OBJECTS and "created Namespace proj-speech" in third.changes
    labels = core.read_namespace("proj-speech").metadata.labels
    assert labels["app.kubernetes.io/managed-by"] == "gpu-portal" and labels["portal.gpu/project"] == "speech"


def test_a_legacy_project_in_kube_system_is_skipped(demo, cluster, core):
    Project.objects.filter(slug="nlp").update(namespace="kube-system")  # saved before the rule existed
    before = core.read_namespace("kube-system")
    result = reconcile(cluster, desired_from_database())
    assert result.project_errors == [
        "Project nlp: Project namespaces start with 'proj-' (or are on the approved list); 'kube-system' is a system "
        "namespace. The reconcile leaves this project out; delete it and create it again with a namespace that "
        "follows the rule."]
    assert not [change for change in result.changes if "nlp" in change or "kube-system" in change]
    assert "created ClusterQueue proj-vision-h100-guaranteed" in result.changes
    after = core.read_namespace("kube-system")
    assert (after.metadata.labels, after.metadata.resource_version) == (before.metadata.labels,
                                                                       before.metadata.resource_version)
    assert cluster.list("LocalQueue", namespace="kube-system") == []
    assert not [key for key in read_owned(cluster) if "nlp" in key[2]]
    # A second run is quiet: the skipped project neither flaps nor takes anything with it.
    assert reconcile(cluster, desired_from_database()).changes == []


def test_a_namespace_labelled_for_another_project_is_left_alone(demo, cluster, core):
    core.create_namespace({"metadata": {"name": "proj-speech", "labels": {
        "app.kubernetes.io/managed-by": "gpu-portal", "portal.gpu/project": "old-speech"}}})
    speech(demo)
    result = reconcile(cluster, desired_from_database())
    assert result.project_errors == [
        "Project speech: namespace proj-speech is labelled for project old-speech (portal.gpu/project); the portal "
        "leaves it and this project's queues alone. Delete that namespace in the cluster once it is unused, or "
        "recreate the project with another namespace."]
    assert speech_objects(cluster) == []
    assert core.read_namespace("proj-speech").metadata.labels["portal.gpu/project"] == "old-speech"
    assert not [change for change in result.changes if "speech" in change]


def test_a_refused_write_fails_its_project_only(demo, cluster):
    reconcile(cluster, desired_from_database())
    # Someone replaced the portal's queue in proj-nlp with one of their own: creating ours answers 409.
    cluster.delete("LocalQueue", "guaranteed-h100", namespace="proj-nlp")
    cluster.create({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                    "metadata": {"name": "guaranteed-h100", "namespace": "proj-nlp"},
                    "spec": {"clusterQueue": "proj-nlp-h100-guaranteed"}})
    set_weight(demo, "vision", "5")
    result = reconcile(cluster, desired_from_database())
    assert result.changes == ["updated Cohort proj-vision-h100"]
    assert len(result.project_errors) == 1
    assert result.project_errors[0].startswith(
        "Project nlp: the API server refused to create LocalQueue proj-nlp/guaranteed-h100: 409 AlreadyExists")
    assert weight(cluster, "proj-vision-h100") == "5"
    assert "app.kubernetes.io/managed-by" not in (
        cluster.get("LocalQueue", "guaranteed-h100", namespace="proj-nlp")["metadata"].get("labels") or {})


def test_the_task_records_skipped_projects_on_the_run(demo, cluster, core):
    core.create_namespace({"metadata": {"name": "proj-speech"}})
    speech(demo)
    changes = tasks.kueue_sync.apply(throw=True).get()
    assert len(changes) == ALL_OBJECTS
    run = KueueSyncRun.objects.first()
    assert run.ok is True and run.error == "" and len(run.changes) == ALL_OBJECTS
    assert len(run.project_errors) == 1 and run.project_errors[0].startswith(
        "Project speech: namespace proj-speech exists in the cluster without the portal's label")
    # The next run goes on too: the other projects stay reconciled, speech stays reported.
    set_weight(demo, "vision", "4")
    assert tasks.kueue_sync.apply(throw=True).get() == ["updated Cohort proj-vision-h100"]
    assert KueueSyncRun.objects.first().project_errors == run.project_errors


def test_the_command_reports_skipped_projects_and_fails(demo, cluster, core, capsys):
    core.create_namespace({"metadata": {"name": "proj-speech"}})
    speech(demo)
    with pytest.raises(CommandError) as failed:
        call_command("sync_kueue")
    assert str(failed.value) == "1 left out or not yet as intended (listed above); the rest was reconciled."
    out, err = capsys.readouterr()
    assert f"{ALL_OBJECTS} change(s)." in out and "Project speech: namespace proj-speech exists" in err
    assert KueueSyncRun.objects.first().project_errors[0].startswith("Project speech:")


def test_the_dry_run_leaves_out_a_legacy_project(demo, capsys):
    import yaml

    Project.objects.filter(slug="nlp").update(namespace="default")
    call_command("sync_kueue", "--dry-run")
    out, err = capsys.readouterr()
    documents = list(yaml.safe_load_all(out))
    assert not [doc for doc in documents if doc["metadata"]["name"] in {"default", "proj-nlp-h100-guaranteed"}]
    assert len(documents) < ALL_OBJECTS and "Project nlp: Project namespaces start with 'proj-'" in err


def test_a_webhook_denial_fails_its_project_only_and_a_forbidden_account_ends_the_run():
    """A validating webhook's refusal is a 403 like RBAC's, but about the object: its project sits the pass out."""
    cq = {"kind": "ClusterQueue", "metadata": {"name": "proj-nlp-h100", "labels": {PROJECT_LABEL: "nlp"}}}
    denial = ('admission webhook "vclusterqueue.kb.io" denied the request: '
              'spec.resourceGroups[0].flavors[0].resources[0].lendingLimit: Invalid value: "3": must be less than or '
              'equal to the nominalQuota')

    def denied():
        raise ClusterError(403, "Forbidden", denial)

    result = SyncResult()
    _guarded(result, "create", cq, denied)
    assert result.failed_projects == {"nlp"}
    assert result.project_errors == [
        f"Project nlp: the API server refused to create ClusterQueue proj-nlp-h100: 403 Forbidden: {denial}. "
        "Its other objects wait for the next pass."]

    def rbac():
        raise ClusterError(403, "Forbidden", 'clusterqueues.kueue.x-k8s.io is forbidden: User "portal" cannot create')

    with pytest.raises(ClusterError):
        _guarded(SyncResult(), "create", cq, rbac)
