"""kube-apiserver's type-specific validation of core/batch kinds (pkg/apis/core/validation), through the official
client: each refusal is a 422 Invalid whose causes name the field, and nothing is stored after it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes.client.rest import ApiException

from kubesim.kernel.quantity import Quantity
from tests.kubesim.conftest import job_body, pod_body, raw

JOB_C0 = "spec.template.spec.containers[0]"


def _portal_job(name: str) -> dict:
    """The shape worker/manifests.py builds: GPU and memory requests equal limits, cpu without a limit."""
    body = job_body(name, suspend=True)
    container = body["spec"]["template"]["spec"]["containers"][0]
    container["env"] = [{"name": "PORTAL_WORKLOAD_ID", "value": "1"}, {"name": "HF_HOME", "value": "/cache"}]
    container["resources"] = {
        "requests": {"cpu": "4", "memory": "32Gi", "nvidia.com/gpu": "2"},
        "limits": {"memory": "32Gi", "nvidia.com/gpu": "2"},
    }
    container["ports"] = [{"name": "http", "containerPort": 8888, "protocol": "TCP"}]
    body["metadata"]["labels"] = {"portal.gpu/workload-id": "1", "kueue.x-k8s.io/queue-name": "team-a"}
    return body


def _refused(api: Any, ns: str, body: dict, resource: str = "jobs") -> dict[str, str]:
    """Create through the typed client; assert 422 Invalid and that nothing was stored; return field -> message."""
    create = {
        "jobs": api.batch.create_namespaced_job,
        "pods": api.core.create_namespaced_pod,
        "services": api.core.create_namespaced_service,
    }[resource]
    read = {
        "jobs": api.batch.read_namespaced_job,
        "pods": api.core.read_namespaced_pod,
        "services": api.core.read_namespaced_service,
    }[resource]
    with pytest.raises(ApiException) as err:
        create(ns, body)
    status = json.loads(err.value.body)
    assert err.value.status == 422 and status["reason"] == "Invalid", status
    with pytest.raises(ApiException) as gone:
        read(body["metadata"]["name"], ns)
    assert gone.value.status == 404
    return {c["field"]: c["message"] for c in status["details"]["causes"]}


def _job_with(job: str, **container: Any) -> dict:
    body = job_body(job)
    body["spec"]["template"]["spec"]["containers"][0].update(container)
    return body


def test_portal_style_job_is_accepted(api, ns):
    made = api.batch.create_namespaced_job(ns, _portal_job("portal"))
    resources = made.spec.template.spec.containers[0].resources
    assert resources.requests == {"cpu": "4", "memory": "32Gi", "nvidia.com/gpu": "2"}
    assert resources.limits == {"memory": "32Gi", "nvidia.com/gpu": "2"}


def test_env_var_names(api, ns):
    # RelaxedEnvironmentVariableValidation is GA (locked on) since Kubernetes 1.34: any printable ASCII but '='.
    api.batch.create_namespaced_job(ns, _job_with("relaxed", env=[{"name": "1BAD.name-ok", "value": "x"}]))
    causes = _refused(api, ns, _job_with("eq", env=[{"name": "A=B", "value": "x"}]))
    assert causes == {
        f"{JOB_C0}.env[0].name": 'Invalid value: "A=B": a valid environment variable name must consist only of '
        "printable ASCII characters other than '='"
    }
    causes = _refused(api, ns, _job_with("empty-env", env=[{"name": "", "value": "x"}]))
    assert causes == {f"{JOB_C0}.env[0].name": "Required value"}
    dup = [{"name": "A", "value": "1"}, {"name": "A", "value": "2"}]
    api.batch.create_namespaced_job(ns, _job_with("dup-env", env=dup))  # kube only warns about duplicates


def test_extended_resources_need_equal_integer_limits(api, ns):
    causes = _refused(
        api, ns, _job_with("gpu-ne", resources={"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "2"}})
    )
    assert causes == {f"{JOB_C0}.resources.requests": 'Invalid value: "1": must be equal to nvidia.com/gpu limit of 2'}
    causes = _refused(api, ns, _job_with("gpu-nolimit", resources={"requests": {"nvidia.com/gpu": "1"}}))
    assert causes == {
        f"{JOB_C0}.resources.limits": "Required value: Limit must be set for non overcommitable resources"
    }
    half = {"requests": {"nvidia.com/gpu": "500m"}, "limits": {"nvidia.com/gpu": "500m"}}
    causes = _refused(api, ns, _job_with("gpu-half", resources=half))
    assert causes[f"{JOB_C0}.resources.limits[nvidia.com/gpu]"] == 'Invalid value: "500m": must be an integer'
    assert causes[f"{JOB_C0}.resources.requests[nvidia.com/gpu]"] == 'Invalid value: "500m": must be an integer'
    api.batch.create_namespaced_job(ns, _job_with("gpu-limit-only", resources={"limits": {"nvidia.com/gpu": "1"}}))


def test_cpu_and_memory_requests_may_not_exceed_limits(api, ns):
    over = {"requests": {"cpu": "2", "memory": "1Gi"}, "limits": {"cpu": "1500m", "memory": "1Gi"}}
    causes = _refused(api, ns, _job_with("cpu-over", resources=over))
    assert causes == {
        f"{JOB_C0}.resources.requests": 'Invalid value: "2": must be less than or equal to cpu limit of 1500m'
    }
    under = {"requests": {"cpu": "500m", "memory": "512Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}}
    api.batch.create_namespaced_job(ns, _job_with("cpu-under", resources=under))


def test_resource_names_and_quantities(api, ns):
    causes = _refused(api, ns, _job_with("bad-name", resources={"limits": {"bad name": "1"}}))
    path = f"{JOB_C0}.resources.limits[bad name]"
    assert causes[path].startswith('Invalid value: "bad name": ') and "must be a standard resource" in causes[path]
    causes = _refused(api, ns, _job_with("unknown-res", resources={"requests": {"gpus": "1"}}))
    assert "must be a standard resource for containers" in causes[f"{JOB_C0}.resources.requests[gpus]"]
    causes = _refused(api, ns, _job_with("neg", resources={"requests": {"cpu": "-1"}}))
    assert causes == {f"{JOB_C0}.resources.requests[cpu]": 'Invalid value: "-1": must be greater than or equal to 0'}


def test_malformed_quantity_is_a_decode_error(api, ns):
    # kube cannot decode the body into a Job at all: 400 BadRequest, before any validation.
    body = _job_with("malformed", resources={"requests": {"cpu": "2 cores"}})
    code, status = raw(api, "POST", f"/apis/batch/v1/namespaces/{ns}/jobs", body)
    assert code == 400 and status["reason"] == "BadRequest"
    assert status["message"] == (
        'Job in version "v1" cannot be handled as a Job: quantities must match the regular expression '
        "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
    )
    assert raw(api, "GET", f"/apis/batch/v1/namespaces/{ns}/jobs/malformed")[0] == 404


def test_container_names_and_image(api, ns):
    assert _refused(api, ns, _job_with("noimage", image="")) == {f"{JOB_C0}.image": "Required value"}
    causes = _refused(api, ns, _job_with("badname", name="Bad_Name"))
    assert causes[f"{JOB_C0}.name"].startswith('Invalid value: "Bad_Name": a lowercase RFC 1123 label must consist')
    body = job_body("dupname")
    containers = body["spec"]["template"]["spec"]["containers"]
    containers.append(dict(containers[0]))
    assert _refused(api, ns, body) == {"spec.template.spec.containers[1].name": 'Duplicate value: "main"'}


def test_container_ports(api, ns):
    causes = _refused(api, ns, _job_with("port-big", ports=[{"containerPort": 70000}]))
    assert causes == {
        f"{JOB_C0}.ports[0].containerPort": "Invalid value: 70000: must be between 1 and 65535, inclusive"
    }
    causes = _refused(api, ns, _job_with("port-name", ports=[{"name": "HTTP_PORT", "containerPort": 80}]))
    assert f"{JOB_C0}.ports[0].name" in causes
    causes = _refused(api, ns, _job_with("host-port", ports=[{"containerPort": 80, "hostPort": -1}]))
    assert f"{JOB_C0}.ports[0].hostPort" in causes


def test_job_counts_and_policies(api, ns):
    for field in ("parallelism", "completions", "backoffLimit"):
        causes = _refused(api, ns, job_body(f"neg-{field.lower()}", **{field: -1}))
        assert causes == {f"spec.{field}": "Invalid value: -1: must be greater than or equal to 0"}
    body = job_body("always")
    body["spec"]["template"]["spec"]["restartPolicy"] = "Always"
    assert "spec.template.spec.restartPolicy" in _refused(api, ns, body)
    body = job_body("indexed", completionMode="Indexed", parallelism=2)
    assert _refused(api, ns, body) == {"spec.completions": "Required value: when completion mode is Indexed"}


def test_metadata_labels_and_annotations(api, ns):
    body = job_body("bad-label")
    body["metadata"]["labels"] = {"team": "not ok!"}
    assert "metadata.labels" in _refused(api, ns, body)
    body = job_body("bad-template-label")
    body["spec"]["template"]["metadata"] = {"labels": {"bad key!": "x"}}
    assert "spec.template.metadata.labels" in _refused(api, ns, body)
    body = job_body("huge-annotations")
    body["metadata"]["annotations"] = {"a": "x" * (256 * 1024)}
    causes = _refused(api, ns, body)
    assert causes == {"metadata.annotations": "Too long: may not be more than 262144 bytes"}


def test_pods_are_validated_but_job_controller_pods_are_internal(api, ks, ns):
    body = pod_body("badpod")
    body["spec"]["containers"][0]["resources"] = {"requests": {"nvidia.com/gpu": "1"}}
    assert "spec.containers[0].resources.limits" in _refused(api, ns, body, "pods")
    api.batch.create_namespaced_job(ns, _portal_job("runs"))
    api.batch.patch_namespaced_job("runs", ns, {"spec": {"suspend": False}})
    ks.settle()
    pods = api.core.list_namespaced_pod(ns, label_selector="job-name=runs").items
    assert len(pods) == 1 and pods[0].spec.containers[0].resources.limits["nvidia.com/gpu"] == "2"


def _service(name: str, *ports: dict, selector: dict | None = None) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name},
        "spec": {"selector": selector or {"app": "nb"}, "ports": list(ports)},
    }


def test_service_ports_and_selector(api, ns):
    api.core.create_namespaced_service(ns, _service("ok", {"name": "http", "port": 80, "targetPort": 8888}))
    api.core.create_namespaced_service(ns, _service("named", {"port": 80, "targetPort": "http"}))
    causes = _refused(api, ns, _service("big", {"port": 70000, "targetPort": 8888}), "services")
    assert causes == {"spec.ports[0].port": "Invalid value: 70000: must be between 1 and 65535, inclusive"}
    causes = _refused(api, ns, _service("tgt", {"port": 80, "targetPort": 65536}), "services")
    assert causes == {"spec.ports[0].targetPort": "Invalid value: 65536: must be between 1 and 65535, inclusive"}
    causes = _refused(api, ns, _service("tname", {"port": 80, "targetPort": "Not_A_Name"}), "services")
    assert "spec.ports[0].targetPort" in causes
    causes = _refused(api, ns, _service("two", {"port": 80}, {"port": 81}), "services")
    assert causes == {"spec.ports[0].name": "Required value", "spec.ports[1].name": "Required value"}
    causes = _refused(api, ns, _service("nosel", {"port": 80}, selector={"app": "bad value!"}), "services")
    assert "spec.selector" in causes


def test_quantity_canonical_form():
    assert [str(Quantity(q)) for q in ("2000m", "0.5", "1.5Gi", "1536", "1e3", "0")] == [
        "2",
        "500m",
        "1536Mi",
        "1536",
        "1e3",
        "0",
    ]


def test_label_messages_are_kubes(api, ns):
    body = job_body("label-msg")
    body["metadata"]["labels"] = {"example.com/ok": "not ok!"}
    assert _refused(api, ns, body) == {
        "metadata.labels": 'Invalid value: "not ok!": a valid label must be an empty string or consist of '
        "alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. "
        "'MyValue',  or 'my_value',  or '12345', regex used for validation is "
        "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
    }
    body = job_body("key-msg")
    body["metadata"]["labels"] = {"Example.com/x": "v"}
    assert _refused(api, ns, body)["metadata.labels"].startswith(
        'Invalid value: "Example.com/x": prefix part a lowercase RFC 1123 subdomain must consist of'
    )


def test_volumes_node_selector_and_tolerations(api, ns):
    body = _job_with("mounts", volumeMounts=[{"name": "data", "mountPath": "/data"}])
    assert _refused(api, ns, body) == {f"{JOB_C0}.volumeMounts[0].name": 'Not found: "data"'}
    body["spec"]["template"]["spec"]["volumes"] = [{"name": "data", "emptyDir": {}}]
    body["metadata"]["name"] = "mounts-ok"
    api.batch.create_namespaced_job(ns, body)
    body = job_body("dup-volumes")
    body["spec"]["template"]["spec"]["volumes"] = [{"name": "data", "emptyDir": {}}, {"name": "data", "emptyDir": {}}]
    assert _refused(api, ns, body) == {"spec.template.spec.volumes[1].name": 'Duplicate value: "data"'}
    body = job_body("node-selector")
    body["spec"]["template"]["spec"]["nodeSelector"] = {"portal.gpu/pool": "h100 sxm"}
    assert "spec.template.spec.nodeSelector" in _refused(api, ns, body)
    body = job_body("toleration")
    body["spec"]["template"]["spec"]["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists", "value": "x"}]
    assert _refused(api, ns, body) == {
        "spec.template.spec.tolerations[0].operator": 'Invalid value: "x": value must be empty when `operator` is '
        "'Exists'"
    }
    body["metadata"]["name"] = "toleration-ok"
    body["spec"]["template"]["spec"]["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists"}]
    api.batch.create_namespaced_job(ns, body)
    body = pod_body("deadline")
    body["spec"]["activeDeadlineSeconds"] = 0
    assert _refused(api, ns, body, "pods") == {
        "spec.activeDeadlineSeconds": "Invalid value: 0: must be between 1 and 2147483647, inclusive"
    }


def test_env_value_from_and_service_names(api, ns):
    source = {"secretKeyRef": {"name": "creds", "key": "token"}}
    body = _job_with("both", env=[{"name": "TOKEN", "value": "x", "valueFrom": source}])
    assert _refused(api, ns, body) == {
        f"{JOB_C0}.env[0].valueFrom": 'Invalid value: "": may not be specified when `value` is not empty'
    }
    api.batch.create_namespaced_job(ns, _job_with("secret-env", env=[{"name": "TOKEN", "valueFrom": source}]))
    causes = _refused(api, ns, _service("1st", {"port": 80}), "services")
    assert causes["metadata.name"].startswith('Invalid value: "1st": a DNS-1035 label must consist of')


def test_a_pod_template_needs_a_container(api, ns):
    body = job_body("no-containers")
    body["spec"]["template"]["spec"]["containers"] = []
    assert _refused(api, ns, body) == {"spec.template.spec.containers": "Required value"}
    body = job_body("template-annotation")
    body["spec"]["template"]["metadata"] = {"annotations": {"bad key!": "x"}}
    assert "spec.template.metadata.annotations" in _refused(api, ns, body)


@pytest.mark.parametrize(
    "path, value",
    [
        (("spec", "template", "spec", "containers"), 5),
        (("spec", "template", "spec", "tolerations"), [{"key": 5, "operator": "Exists"}]),
        (("spec", "template", "spec", "containers", 0, "volumeMounts"), [{"name": "d", "mountPath": {}}]),
        (("metadata", "name"), 5),
        (("metadata", "labels"), "team-a"),
    ],
)
def test_ill_typed_bodies_are_422_not_500(api, ns, path, value):
    body: Any = job_body("typed")
    target = body
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    code, status = raw(api, "POST", f"/apis/batch/v1/namespaces/{ns}/jobs", body)
    assert code == 422 and status["reason"] == "Invalid", status


def test_a_pods_requests_default_to_its_limits(api, ns):
    body = pod_body("half-gpu")
    body["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "500m"}}
    assert _refused(api, ns, body, "pods") == {
        "spec.containers[0].resources.limits[nvidia.com/gpu]": 'Invalid value: "500m": must be an integer',
        "spec.containers[0].resources.requests[nvidia.com/gpu]": 'Invalid value: "500m": must be an integer',
    }
    body = pod_body("one-gpu")
    body["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "1", "memory": "1Gi"}}
    made = api.core.create_namespaced_pod(ns, body)
    assert made.spec.containers[0].resources.requests == {"nvidia.com/gpu": "1", "memory": "1Gi"}
    job = api.batch.create_namespaced_job(ns, _job_with("template", resources={"limits": {"nvidia.com/gpu": "1"}}))
    assert job.spec.template.spec.containers[0].resources.requests is None  # templates are not defaulted


def test_manual_selector_must_match_the_template(api, ns):
    body = job_body("manual", manualSelector=True)
    assert _refused(api, ns, body) == {"spec.selector": "Required value"}
    body = job_body("manual-mismatch", manualSelector=True, selector={"matchLabels": {"app": "x"}})
    body["spec"]["template"]["metadata"] = {"labels": {"app": "y", "team": "a"}}
    assert _refused(api, ns, body) == {
        "spec.template.metadata.labels": 'Invalid value: map[string]string{"app":"y", "team":"a"}: '
        "`selector` does not match template `labels`"
    }
    body = job_body(
        "manual-ok",
        manualSelector=True,
        selector={"matchExpressions": [{"key": "app", "operator": "In", "values": ["x", "y"]}]},
    )
    body["spec"]["template"]["metadata"] = {"labels": {"app": "y"}}
    api.batch.create_namespaced_job(ns, body)


def test_object_name_messages_are_kubes(api, ns):
    assert _refused(api, ns, pod_body("Bad_Name"), "pods") == {
        "metadata.name": 'Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain must consist of lower case '
        "alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. "
        "'example.com', regex used for validation is "
        "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
    }
