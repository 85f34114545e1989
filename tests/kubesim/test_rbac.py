"""kubesim's ServiceAccount tokens and RBAC authorization (kubesim/apiserver/auth/rbac.py): off by default, kube's
401/403 and their messages when on, Roles and ClusterRoles through their bindings, resourceNames, subresources,
access reviews, and the records of denials and used rules."""

import pytest
from kubernetes import client

from kubesim.apiserver.auth.kubeconfig import TOKEN
from kubesim.testing import KubesimProcess, RequestError, _request, serve

NS = "team"


@pytest.fixture(scope="module")
def ks():
    with serve(clock="manual", rbac=True) as served:
        yield served


@pytest.fixture
def sa(ks):
    """A fresh namespace with ServiceAccount `runner`; its token."""
    ks.reset()
    ks.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    ks.apply({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "runner", "namespace": NS}})
    return ks.service_account_token(NS, "runner")


def call(ks, token, method, path, body=None):
    return _request(ks.url, method, path, body, token=token)


def refusal(ks, token, method, path, body=None):
    with pytest.raises(RequestError) as caught:
        call(ks, token, method, path, body)
    return caught.value.status


def pod(name):
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"containers": [{"name": "c", "image": "busybox:1", "command": ["sleep", "5"]}]},
    }


def test_unknown_or_missing_token_is_401_and_the_admin_may_do_anything(ks, sa):
    assert refusal(ks, None, "GET", "/api/v1/namespaces")["code"] == 401
    assert refusal(ks, "made-up", "GET", "/api/v1/namespaces")["reason"] == "Unauthorized"
    assert any(n["metadata"]["name"] == NS for n in call(ks, TOKEN, "GET", "/api/v1/namespaces")["items"])


def test_a_service_account_without_bindings_is_forbidden_with_kubes_message(ks, sa):
    status = refusal(ks, sa, "GET", f"/apis/batch/v1/namespaces/{NS}/jobs")
    assert status["code"] == 403 and status["reason"] == "Forbidden"
    assert status["message"] == (
        f'jobs.batch is forbidden: User "system:serviceaccount:{NS}:runner" cannot list '
        f'resource "jobs" in API group "batch" in the namespace "{NS}"'
    )
    status = refusal(ks, sa, "GET", "/apis/kueue.x-k8s.io/v1beta2/clusterqueues/cq")
    assert status["message"] == (
        'clusterqueues.kueue.x-k8s.io "cq" is forbidden: User '
        f'"system:serviceaccount:{NS}:runner" cannot get resource "clusterqueues" in API '
        'group "kueue.x-k8s.io" at the cluster scope'
    )
    assert status["details"] == {"name": "cq", "group": "kueue.x-k8s.io", "kind": "clusterqueues"}
    assert call(ks, sa, "GET", "/version")["major"] == "1"  # discovery is open to every authenticated user
    assert call(ks, sa, "GET", "/apis/batch/v1")["groupVersion"] == "batch/v1"
    assert len(ks.rbac()["denials"]) == 2


def test_role_binding_resource_names_and_subresources(ks, sa):
    call(ks, TOKEN, "POST", f"/api/v1/namespaces/{NS}/pods", pod("a"))
    call(ks, TOKEN, "POST", f"/api/v1/namespaces/{NS}/pods", pod("b"))
    ks.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": "reader", "namespace": NS},
            "rules": [
                {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"], "resourceNames": ["a"]},
                {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]},
            ],
        }
    )
    assert refusal(ks, sa, "GET", f"/api/v1/namespaces/{NS}/pods/a")["code"] == 403  # no binding yet
    ks.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "reader", "namespace": NS},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"},
            "subjects": [{"kind": "ServiceAccount", "name": "runner"}],
        }
    )
    ks.clear_rbac_records()
    assert call(ks, sa, "GET", f"/api/v1/namespaces/{NS}/pods/a")["metadata"]["name"] == "a"
    assert refusal(ks, sa, "GET", f"/api/v1/namespaces/{NS}/pods/b")["message"].startswith('pods "b" is forbidden')
    assert refusal(ks, sa, "GET", f"/api/v1/namespaces/{NS}/pods")["code"] == 403  # list has no name to match
    assert refusal(ks, sa, "GET", "/api/v1/namespaces/other/pods/a")["code"] == 403  # a Role is its namespace's
    ks.advance(1)
    assert "started" in call(ks, sa, "GET", f"/api/v1/namespaces/{NS}/pods/b/log")  # no resourceNames on pods/log
    report = ks.rbac()
    assert {(g["role"], g["rule"], g["verb"], g["resource"]) for g in report["grants"]} == {
        (f"Role/{NS}/reader", 0, "get", "pods"),
        (f"Role/{NS}/reader", 1, "get", "pods/log"),
    }
    assert len(report["denials"]) == 3


def test_cluster_role_binding_and_access_review(ks, sa):
    ks.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": "jobs"},
            "rules": [{"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["list", "watch"]}],
        }
    )
    ks.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "jobs"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "jobs"},
            "subjects": [{"kind": "ServiceAccount", "name": "runner", "namespace": NS}],
        }
    )
    assert call(ks, sa, "GET", "/apis/batch/v1/jobs")["items"] == []
    assert call(ks, sa, "GET", f"/apis/batch/v1/namespaces/{NS}/jobs")["items"] == []

    def review(**attributes):
        body = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": attributes},
        }
        return call(ks, sa, "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", body)["status"]

    before = ks.rbac()
    assert review(group="batch", resource="jobs", verb="watch")["allowed"] is True
    assert review(group="batch", resource="jobs", verb="create", namespace=NS)["allowed"] is False
    assert ks.rbac() == before  # asking is neither a use nor a denial


def test_rbac_is_off_by_default():
    with serve(clock="manual") as ks:
        assert _request(ks.url, "GET", "/api/v1/namespaces")["items"]
        body = {"spec": {"resourceAttributes": {"verb": "delete", "resource": "nodes"}}}
        status = _request(ks.url, "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", body)["status"]
        assert status["allowed"] is True
        assert ks.rbac() == {"enabled": False, "denials": [], "grants": []}


def test_kueue_installation_is_visible(ks, sa):
    crds = call(ks, TOKEN, "GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions")["items"]
    assert "clusterqueues.kueue.x-k8s.io" in {c["metadata"]["name"] for c in crds}
    manager = call(ks, TOKEN, "GET", "/apis/apps/v1/namespaces/kueue-system/deployments/kueue-controller-manager")
    assert manager["spec"]["template"]["spec"]["containers"][0]["image"].startswith("registry.k8s.io/kueue/kueue:v0.")
    config = call(ks, TOKEN, "GET", "/api/v1/namespaces/kueue-system/configmaps/kueue-manager-config")
    assert "fairSharing" in config["data"]["controller_manager_config.yaml"]
    groups = {g["name"] for g in call(ks, TOKEN, "GET", "/apis")["groups"]}
    assert {
        "apps",
        "networking.k8s.io",
        "rbac.authorization.k8s.io",
        "apiextensions.k8s.io",
        "authorization.k8s.io",
    } <= groups


def test_the_cli_flag_turns_rbac_on(tmp_path):
    with KubesimProcess(str(tmp_path), "--rbac") as ks:
        assert refusal(ks, None, "GET", "/api/v1/namespaces")["code"] == 401
        assert ks.rbac()["enabled"] is True
        names = [n.metadata.name for n in client.CoreV1Api(ks.api_client()).list_namespace().items]
        assert "kueue-system" in names  # the written kubeconfig holds the admin's token


def test_whoami_and_rules_review_name_the_token_and_its_rules(ks, sa):
    ks.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": "pods", "namespace": NS},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}],
        }
    )
    ks.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "pods", "namespace": NS},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pods"},
            "subjects": [{"kind": "ServiceAccount", "name": "runner", "namespace": NS}],
        }
    )
    review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    who = call(ks, sa, "POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", review)["status"]["userInfo"]
    assert who["username"] == f"system:serviceaccount:{NS}:runner"
    assert f"system:serviceaccounts:{NS}" in who["groups"]
    admin = call(ks, TOKEN, "POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", review)
    assert admin["status"]["userInfo"]["username"] == "kubesim-admin"

    body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview", "spec": {"namespace": NS}}
    rules = call(ks, sa, "POST", "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews", body)["status"]
    assert rules["resourceRules"] == [{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods"]}]
    assert any("/version" in r["nonResourceURLs"] for r in rules["nonResourceRules"])
    body["spec"] = {"namespace": "elsewhere"}
    assert (
        call(ks, sa, "POST", "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews", body)["status"]["resourceRules"]
        == []
    )


def test_default_cluster_roles_aggregate_and_authorize_when_bound(ks, sa):
    """cluster-admin, admin, edit and view exist as Kubernetes creates them; a ClusterRole labelled to aggregate into
    view has its rules merged into view, and through view's own label into edit and admin; a view binding then
    reads (the aggregated kind too) and writes nothing."""
    names = {
        r["metadata"]["name"]
        for r in call(ks, TOKEN, "GET", "/apis/rbac.authorization.k8s.io/v1/clusterroles")["items"]
    }
    assert {"cluster-admin", "admin", "edit", "view"} <= names
    view = call(ks, TOKEN, "GET", "/apis/rbac.authorization.k8s.io/v1/clusterroles/view")
    assert view["aggregationRule"] == {
        "clusterRoleSelectors": [{"matchLabels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}}]
    }
    assert view["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-edit"] == "true"
    workloads = {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads"], "verbs": ["get", "list", "watch"]}
    assert workloads not in view["rules"]
    ks.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": "workloads-viewer", "labels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}},
            "rules": [workloads],
        }
    )
    for role in ("view", "edit", "admin"):
        rules = call(ks, TOKEN, "GET", f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{role}")["rules"]
        assert workloads in rules, role
    ks.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "runner-view", "namespace": NS},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
            "subjects": [{"kind": "ServiceAccount", "name": "runner", "namespace": NS}],
        }
    )
    assert call(ks, sa, "GET", f"/api/v1/namespaces/{NS}/pods")["items"] == []
    assert call(ks, sa, "GET", f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{NS}/workloads")["items"] == []
    assert refusal(ks, sa, "GET", f"/api/v1/namespaces/{NS}/secrets")["code"] == 403  # view does not read secrets
    assert refusal(ks, sa, "POST", f"/api/v1/namespaces/{NS}/pods", pod("p"))["code"] == 403
    assert refusal(ks, sa, "GET", "/api/v1/namespaces/other/pods")["code"] == 403  # a RoleBinding is its namespace's

    def review(**attributes):
        body = {"kind": "SelfSubjectAccessReview", "spec": {"resourceAttributes": attributes}}
        return call(ks, sa, "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", body)["status"]["allowed"]

    assert review(verb="list", group="kueue.x-k8s.io", resource="workloads", namespace=NS) is True
    assert review(verb="delete", group="batch", resource="jobs", namespace=NS) is False
    # the aggregated rule goes when its role does
    call(ks, TOKEN, "DELETE", "/apis/rbac.authorization.k8s.io/v1/clusterroles/workloads-viewer")
    assert workloads not in call(ks, TOKEN, "GET", "/apis/rbac.authorization.k8s.io/v1/clusterroles/admin")["rules"]
    assert refusal(ks, sa, "GET", f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{NS}/workloads")["code"] == 403
