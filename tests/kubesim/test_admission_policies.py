"""MutatingAdmissionPolicies in kubesim: what a binding selects (resource rules, namespace selector, match
conditions), the requesting user (the admin, or whom it impersonates) in request.userInfo, failurePolicy."""

import json

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from kubesim.testing import serve

GROUP, VERSION = "admissionregistration.k8s.io", "v1beta1"


def policy(name="stamp", expression="Object{metadata: Object.metadata{labels: {\"who\": request.userInfo.username}}}",
           failure="Fail", conditions=()):
    return {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "MutatingAdmissionPolicy", "metadata": {"name": name},
        "spec": {
            "failurePolicy": failure,
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                                                    "resources": ["configmaps"]}]},
            "matchConditions": [{"name": f"c{i}", "expression": c} for i, c in enumerate(conditions)],
            "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": expression}}],
        },
    }


def binding(name="stamp", selector=None):
    spec = {"policyName": name}
    if selector is not None:
        spec["matchResources"] = {"namespaceSelector": selector}
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "MutatingAdmissionPolicyBinding", "metadata": {"name": name},
            "spec": spec}


@pytest.fixture
def ks():
    with serve(clock="manual") as served:
        for name, labels in (("team", {"team": "a"}), ("other", {})):
            served.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}})
        yield served


def core_as(ks, user=None):
    api_client = ks.api_client()
    if user:
        api_client.set_default_header("Impersonate-User", user)
    return k8s.CoreV1Api(api_client)


def create_config_map(api, namespace, name, **metadata):
    return api.create_namespaced_config_map(namespace, {"metadata": {"name": name, **metadata}}).metadata


def test_the_requesting_user_is_applied_where_the_binding_selects(ks):
    ks.apply(policy())
    ks.apply(binding(selector={"matchLabels": {"team": "a"}}))
    assert create_config_map(core_as(ks, "alice"), "team", "a").labels == {"who": "alice"}
    assert create_config_map(core_as(ks), "team", "b", labels={"keep": "1"}).labels == {"keep": "1",
                                                                                           "who": "kubesim-admin"}
    assert create_config_map(core_as(ks, "alice"), "other", "c").labels is None  # namespace not selected
    created = core_as(ks, "alice").create_namespaced_secret("team", {"metadata": {"name": "s"}})
    assert created.metadata.labels is None  # a resource the policy does not match


def test_a_policy_without_binding_does_nothing_and_a_false_condition_skips_it(ks):
    ks.apply(policy())
    assert create_config_map(core_as(ks, "alice"), "team", "unbound").labels is None
    ks.apply(policy("skip", conditions=["has(object.metadata.labels)"]))
    ks.apply(binding("skip"))
    assert create_config_map(core_as(ks, "alice"), "team", "bare").labels is None
    assert create_config_map(core_as(ks, "alice"), "team", "labelled", labels={"x": "1"}).labels == {
        "x": "1", "who": "alice"}


@pytest.mark.parametrize(("failure", "refused"), [("Fail", True), ("Ignore", False)])
def test_a_failing_policy_refuses_the_write_under_fail_and_is_skipped_under_ignore(ks, failure, refused):
    ks.apply(policy(expression="Object{metadata: Object.metadata{labels: {\"x\": object.spec.missing}}}",
                    failure=failure))
    ks.apply(binding())
    if refused:
        with pytest.raises(ApiException) as error:
            create_config_map(core_as(ks), "team", "x")
        assert error.value.status == 403
        assert "policy 'stamp' with binding 'stamp' denied request" in error.value.body
        assert not core_as(ks).list_namespaced_config_map("team", field_selector="metadata.name=x").items
    else:
        assert create_config_map(core_as(ks), "team", "x").labels is None


def test_impersonation_needs_the_impersonate_verb_under_rbac():
    with serve(clock="manual", rbac=True) as ks:
        ks.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}})
        ks.apply({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "ci", "namespace": "team"}})
        api_client = k8s.ApiClient(k8s.Configuration(host=ks.url))
        api_client.configuration.api_key = {"authorization": f"Bearer {ks.service_account_token('team', 'ci')}"}
        api_client.set_default_header("Impersonate-User", "alice")
        with pytest.raises(ApiException) as error:
            k8s.CoreV1Api(api_client).list_namespaced_config_map("team")
        assert error.value.status == 403
        assert json.loads(error.value.body)["message"] == (
            'users "alice" is forbidden: User "system:serviceaccount:team:ci" cannot impersonate resource "users" in '
            'API group "" at the cluster scope')
