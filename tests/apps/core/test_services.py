"""Write helpers every app's services share."""

from __future__ import annotations

import threading

import pytest
from django.db import connection, transaction

from apps.core.services import lock_for_transaction


@pytest.mark.django_db(transaction=True)
def test_a_transaction_lock_holds_other_writers_of_its_key_until_commit():
    """A second transaction naming the same key waits for the first to end; another key does not wait."""
    if connection.vendor != "postgresql":
        pytest.skip("advisory locks are PostgreSQL's; SQLite serialises writers itself")
    held, release = threading.Event(), threading.Event()
    order: list[str] = []

    def first() -> None:
        with transaction.atomic():
            lock_for_transaction("test-key")
            held.set()
            release.wait(10)
            order.append("first commits")
        connection.close()

    def second(key: str, done: threading.Event) -> None:
        with transaction.atomic():
            lock_for_transaction(key)
            order.append(f"second has {key}")
        connection.close()
        done.set()

    holder = threading.Thread(target=first)
    holder.start()
    assert held.wait(10)
    other_done, same_done = threading.Event(), threading.Event()
    threading.Thread(target=second, args=("other-key", other_done)).start()
    assert other_done.wait(10)
    waiter = threading.Thread(target=second, args=("test-key", same_done))
    waiter.start()
    assert not same_done.wait(0.5)
    release.set()
    holder.join(10)
    waiter.join(10)
    assert order == ["second has other-key", "first commits", "second has test-key"]
