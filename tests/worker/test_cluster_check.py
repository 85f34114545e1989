"""`manage.py cluster_check` against kubesim: a ready cluster passes, and each thing the portal depends on fails
(or warns) its own line when missing: an account lacking a verb under RBAC, Kueue's Configuration, no Kueue at all,
an API server that is not there."""

import socket
from io import StringIO
from pathlib import Path

import pytest
import yaml
from django.core.management import CommandError, call_command

from kubesim.apiserver.registry.resources import RESOURCES
from kubesim.testing import serve
from worker.outside_work import OWNER_KINDS
from worker.permissions import COMPONENTS

BASE = Path(__file__).resolve().parents[2] / "deploy" / "base"


def cluster_check(*args):
    """(exit code, output) of the command."""
    out = StringIO()
    try:
        call_command("cluster_check", *args, stdout=out)
    except CommandError as error:
        return 1, out.getvalue() + str(error)
    return 0, out.getvalue()


def line(output, title):
    return next(text for text in output.splitlines() if text[2:].startswith(title))


def test_a_ready_cluster_passes_without_rbac(settings):
    with serve(clock="manual") as ks:
        settings.KUBECONFIG = ks.kubeconfig_path
        code, output = cluster_check()
    assert code == 0, output
    assert line(output, "Kubernetes") == "✓ Kubernetes: v1.34.0-kubesim"
    assert line(output, "Kueue controller") == "✓ Kueue controller: Kueue v0.20.0, 1 ready"
    assert line(output, "Kueue CRDs").startswith("✓")
    assert line(output, "Visibility API").startswith("✓")
    assert line(output, "Fair sharing").startswith("✓")
    integration = line(output, "Job integration")
    assert integration.startswith("✓ Job integration: frameworks: batch/job, jobset.x-k8s.io/jobset")
    assert "trainer.kubeflow.org/trainjob, kubeflow.org/pytorchjob" in integration
    assert "ray.io/rayjob, ray.io/raycluster" in integration
    assert integration.endswith(", pod, leaderworkerset.x-k8s.io/leaderworkerset")
    assert line(output, "Ingress class").startswith("! Ingress class: none")  # a warning only
    assert line(output, "May get pods/log") == "✓ May get pods/log: allowed"
    assert "The cluster is ready for the portal." in output


@pytest.fixture
def enforcing(tmp_path, settings):
    """kubesim with RBAC on and deploy/'s ClusterRoles; `login(component, drop=...)` points the portal at a
    service account bound to that component's role, minus the verbs in `drop` ((resource, verb) pairs)."""
    with serve(clock="manual", rbac=True) as ks:
        ks.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gpu-portal"}})

        def login(component, drop=()):
            name = f"gpu-portal-{component}"
            ks.apply({"apiVersion": "v1", "kind": "ServiceAccount",
                      "metadata": {"name": name, "namespace": "gpu-portal"}})
            for obj in yaml.safe_load_all((BASE / "rbac.yaml").read_text()):
                if obj["metadata"]["name"] == name:
                    if obj["kind"] in ("ClusterRole", "Role"):
                        for rule in obj["rules"]:
                            rule["verbs"] = [v for v in rule["verbs"] if (rule["resources"][0], v) not in drop]
                    if obj["kind"] in ("Role", "RoleBinding"):
                        obj["metadata"]["namespace"] = "gpu-portal"
                    ks.apply(obj)
            settings.KUBECONFIG = ks.write_kubeconfig(str(tmp_path / name), ks.service_account_token("gpu-portal",
                                                                                                     name))

        yield login


def test_the_worker_account_passes_its_own_review_under_rbac(enforcing):
    enforcing("worker")
    code, output = cluster_check("--component", "worker")
    assert code == 0, output
    assert all(line(output, f"May {', '.join(p.verbs)}").startswith("✓") for p in COMPONENTS["worker"])
    # The portal's account may not read CustomResourceDefinitions: a warning that says how to see them. It reads
    # Deployments (it runs inference services as Deployments, in any project namespace), so Kueue's controller too.
    assert line(output, "Kueue CRDs") == "! Kueue CRDs: this account may not read CustomResourceDefinitions"
    assert line(output, "Kueue controller") == "✓ Kueue controller: Kueue v0.20.0, 1 ready"


def test_a_missing_verb_fails_its_line(enforcing):
    enforcing("worker", drop={("jobs", "delete")})
    code, output = cluster_check("--component", "worker")
    assert code == 1
    assert line(output, "May create, get, delete jobs.batch") == "✗ May create, get, delete jobs.batch: denied: delete"
    assert "fix: apply deploy/base/rbac.yaml" in output
    assert line(output, "May get pods/log").startswith("✓")
    assert output.endswith("1 check failed.")


def test_the_watcher_account_lacks_the_workers_verbs(enforcing):
    enforcing("watcher")
    assert cluster_check("--component", "watcher")[0] == 0
    code, output = cluster_check()  # all components' verbs, with only the watcher's role
    assert code == 1
    assert line(output, "May create, get, delete, list, watch jobs.batch") == (
        "✗ May create, get, delete, list, watch jobs.batch: denied: create, get, delete")


def test_with_leader_election_the_lease_is_reviewed_in_the_portals_namespace(enforcing, settings):
    settings.LEADER_ELECTION, settings.PORTAL_NAMESPACE = True, "gpu-portal"
    enforcing("beat")
    code, output = cluster_check("--component", "beat")
    assert code == 0, output
    assert line(output, "May create leases") == "✓ May create leases.coordination.k8s.io in gpu-portal: allowed"
    assert line(output, "May get, update leases") == (
        "✓ May get, update leases.coordination.k8s.io gpu-portal-beat in gpu-portal: allowed")
    assert "jobs.batch" not in output  # beat holds nothing else
    settings.LEADER_ELECTION = False
    assert "leases" not in cluster_check("--component", "beat")[1]  # one beat: no Lease to review


def test_a_lease_it_may_not_renew_fails_its_line(enforcing, settings):
    settings.LEADER_ELECTION, settings.PORTAL_NAMESPACE = True, "gpu-portal"
    enforcing("watcher", drop={("leases", "update")})
    code, output = cluster_check("--component", "watcher")
    assert code == 1
    assert line(output, "May get, update leases") == (
        "✗ May get, update leases.coordination.k8s.io gpu-portal-watcher in gpu-portal: denied: update")
    assert "Roles gpu-portal-watcher and gpu-portal-beat in the portal's namespace" in output


def test_kueue_configuration_the_portal_cannot_work_with(settings):
    config = {"fairSharing": None, "resources": {"quotaCheckStrategy": "BlockUndeclared"}}
    with serve(clock="manual", kueue_config=config) as ks:
        settings.KUBECONFIG = ks.kubeconfig_path
        code, output = cluster_check()
    assert code == 1
    assert line(output, "Fair sharing").startswith("✗ Fair sharing: off")
    assert line(output, "Quota check strategy").startswith("✗ Quota check strategy: BlockUndeclared")
    assert output.endswith("2 checks failed.")


def test_each_kind_of_outside_work_is_installed_or_not_and_managed_by_kueue_or_not(settings):
    """A kind whose CRD the cluster lacks is "not installed", never a failure; an installed kind Kueue does not
    manage is a warning naming the framework to enable."""
    with serve(clock="manual", kueue_config={"integrations": {"frameworks": ["batch/job"]}}) as ks:
        settings.KUBECONFIG = ks.kubeconfig_path
        code, output = cluster_check()
    assert code == 0, output
    assert line(output, "Kind Job") == "✓ Kind Job: batch/v1, Kueue integration batch/job"
    assert line(output, "Kind JobSet") == (
        "! Kind JobSet: jobset.x-k8s.io/v1alpha2 is served but jobset.x-k8s.io/jobset is not among Kueue's "
        "integrations.frameworks: its work bypasses Kueue's queues (the portal flags its GPU pods as running "
        "outside the queue)")
    assert "fix: add jobset.x-k8s.io/jobset to integrations.frameworks in kueue-manager-config" in output
    for (group, kind), owner in OWNER_KINDS.items():
        served = RESOURCES.get(owner.plural)
        if served is None or served.group != group:  # kubesim does not serve it (yet): a cluster without its CRD
            assert line(output, f"Kind {kind}") == (
                f"✓ Kind {kind}: not installed ({owner.plural}.{group} is not served): no such work to watch")
        else:
            assert not line(output, f"Kind {kind}").startswith("✗")


def test_a_cluster_without_kueue(settings):
    with serve(clock="manual", kueue=None) as ks:
        settings.KUBECONFIG = ks.kubeconfig_path
        code, output = cluster_check()
    assert code == 1
    assert line(output, "Kueue CRDs").startswith("✗ Kueue CRDs: missing or without v1beta2: resourceflavors")
    assert line(output, "Kueue controller").startswith("! Kueue controller")


def test_an_unreachable_api_server_reads_as_such(settings, tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    from kubesim.apiserver.auth.kubeconfig import write_kubeconfig

    write_kubeconfig(str(tmp_path / "config"), f"http://127.0.0.1:{port}")
    settings.KUBECONFIG = str(tmp_path / "config")
    code, output = cluster_check()
    assert code == 1
    assert output.startswith(f"✗ API server: cannot reach the cluster at http://127.0.0.1:{port}")
    assert "refused the change" not in output
