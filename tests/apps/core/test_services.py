"""Write helpers every app's services share."""

from __future__ import annotations

import threading

import pytest
from django.db import connection, transaction

from apps.core.services import lock_for_transaction, lock_many_for_transaction


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


@pytest.mark.django_db(transaction=True)
def test_many_keys_locked_in_one_statement_hold_each_of_them_and_never_deadlock():
    """Writers of overlapping key sets, each listing them in another order, all finish; a writer of one of the keys
    waits for the holder of many."""
    if connection.vendor != "postgresql":
        pytest.skip("advisory locks are PostgreSQL's; SQLite serialises writers itself")
    held, release, waited = threading.Event(), threading.Event(), threading.Event()

    def many(keys: list[str]) -> None:
        with transaction.atomic():
            lock_many_for_transaction(keys)
            held.set()
            release.wait(10)
        connection.close()

    def one() -> None:
        with transaction.atomic():
            lock_for_transaction("b")
        connection.close()
        waited.set()

    holder = threading.Thread(target=many, args=(["c", "b", "a"],))
    holder.start()
    assert held.wait(10)
    threading.Thread(target=one).start()
    assert not waited.wait(0.5)
    release.set()
    holder.join(10)
    assert waited.wait(10)

    release.clear()
    errors: list[BaseException] = []

    def crossing(keys: list[str]) -> None:
        try:
            for _ in range(20):
                with transaction.atomic():
                    lock_many_for_transaction(keys)
        except BaseException as error:  # a deadlock would surface here
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=crossing, args=(keys,)) for keys in (["a", "b", "c"], ["c", "b", "a"],
                                                                           ["b", "c", "a"])]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not errors
