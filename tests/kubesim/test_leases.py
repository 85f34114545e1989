"""Leases (coordination.k8s.io/v1) in any namespace, as leader election uses them through the official client:
created, read, replaced under optimistic concurrency (a stale resourceVersion is kube's 409 Conflict), a second
create is 409 AlreadyExists, listed and deleted."""

from datetime import UTC, datetime

import pytest
from kubernetes import client


@pytest.fixture
def leases(api):
    return client.CoordinationV1Api(api.client)


def lease(name: str, holder: str) -> client.V1Lease:
    now = datetime.now(UTC)
    return client.V1Lease(metadata=client.V1ObjectMeta(name=name), spec=client.V1LeaseSpec(
        holder_identity=holder, lease_duration_seconds=15, acquire_time=now, renew_time=now, lease_transitions=0))


def test_a_lease_is_created_read_replaced_listed_and_deleted(leases, ns):
    with pytest.raises(client.ApiException) as missing:
        leases.read_namespaced_lease("portal", ns)
    assert missing.value.status == 404
    created = leases.create_namespaced_lease(ns, lease("portal", "a"))
    read = leases.read_namespaced_lease("portal", ns)
    assert read.spec.holder_identity == "a" and read.spec.lease_duration_seconds == 15
    assert read.spec.renew_time == created.spec.renew_time
    read.spec.holder_identity, read.spec.lease_transitions = "b", 1
    replaced = leases.replace_namespaced_lease("portal", ns, read)
    assert (replaced.spec.holder_identity, replaced.spec.lease_transitions) == ("b", 1)
    assert int(replaced.metadata.resource_version) > int(created.metadata.resource_version)
    assert [item.metadata.name for item in leases.list_namespaced_lease(ns).items] == ["portal"]
    leases.delete_namespaced_lease("portal", ns)
    assert leases.list_namespaced_lease(ns).items == []


def test_a_write_from_a_stale_read_is_a_conflict_and_a_second_create_already_exists(leases, ns):
    first = leases.create_namespaced_lease(ns, lease("portal", "a"))
    second_reader = leases.read_namespaced_lease("portal", ns)
    first.spec.renew_time = datetime.now(UTC)
    leases.replace_namespaced_lease("portal", ns, first)
    second_reader.spec.holder_identity = "b"
    with pytest.raises(client.ApiException) as stale:
        leases.replace_namespaced_lease("portal", ns, second_reader)
    assert (stale.value.status, stale.value.reason) == (409, "Conflict")
    with pytest.raises(client.ApiException) as twice:
        leases.create_namespaced_lease(ns, lease("portal", "b"))
    assert twice.value.status == 409 and '"AlreadyExists"' in twice.value.body
    assert leases.read_namespaced_lease("portal", ns).spec.holder_identity == "a"
