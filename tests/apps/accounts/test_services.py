"""Role-binding writes under concurrency: the last hand-made admin binding survives parallel removals."""

from __future__ import annotations

import threading

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import connection

from apps.accounts.models import BindingSource, Role, RoleBinding, Scope
from apps.accounts.services import role_binding_create, role_binding_delete
from tests.conftest import demo_users


@pytest.mark.django_db(transaction=True)
def test_parallel_removals_of_the_admin_bindings_leave_one():
    """Twenty threads, each on its own connection, remove the hand-made admin bindings at once; whatever the
    interleaving, exactly one stays and every other removal either succeeded or was refused as the last one."""
    if connection.vendor != "postgresql":
        pytest.skip("row locks are PostgreSQL's; SQLite serialises writers itself")
    admin = demo_users()["admin"]
    second = get_user_model().objects.create_user("second-admin")
    role_binding_create(actor=admin, role=Role.ADMIN, user=second)
    admin_bindings = RoleBinding.objects.filter(role=Role.ADMIN, scope=Scope.EVERYTHING, source=BindingSource.MANUAL)
    bindings = list(admin_bindings.all())
    assert len(bindings) == 2
    start = threading.Barrier(20)
    outcomes: list[str] = []

    def remove(binding: RoleBinding) -> None:
        try:
            start.wait(10)
            role_binding_delete(actor=admin, binding=RoleBinding.objects.get(pk=binding.pk))
            outcomes.append("removed")
        except ValidationError as exc:
            outcomes.append("refused" if "last admin" in str(exc) else "gone" if "removed meanwhile" in str(exc)
                            else str(exc))
        except RoleBinding.DoesNotExist:
            outcomes.append("gone")
        finally:
            connection.close()

    threads = [threading.Thread(target=remove, args=(bindings[i % 2],)) for i in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert admin_bindings.count() == 1
    assert len(outcomes) == 20 and set(outcomes) <= {"removed", "refused", "gone"}
    assert outcomes.count("removed") == 1
