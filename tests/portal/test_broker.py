"""The embedded broker (portal/broker.py): a worker polling the folder never takes a message half written."""

from __future__ import annotations

import socket
import threading
from time import monotonic

import pytest
from kombu import Connection, Exchange, Queue


def _connection(folder, transport):
    return Connection("filesystem://", transport=transport, transport_options={
        "data_folder_in": str(folder), "data_folder_out": str(folder), "store_processed": False,
        "control_folder": str(folder / "control")})


@pytest.mark.parametrize("transport", ["portal.broker:Transport"])  # kombu's own ("filesystem") fails it
def test_a_reader_polling_the_folder_gets_every_message_whole(tmp_path, transport):
    body = {"payload": "x" * 2_000_000}  # big enough that writing it takes a while
    sent = 40
    writer_done = threading.Event()

    def write() -> None:
        with _connection(tmp_path, transport) as connection:
            queue = connection.SimpleQueue("portal")
            for index in range(sent):
                queue.put({**body, "index": index})
        writer_done.set()

    writer = threading.Thread(target=write)
    received = []
    with _connection(tmp_path, transport) as connection:
        queue = connection.SimpleQueue("portal")
        writer.start()
        while len(received) < sent:
            try:
                message = queue.get(block=False)
            except queue.Empty:
                if writer_done.is_set() and not any(tmp_path.glob("*.msg")):
                    break
                continue
            received.append(message.payload["index"])
            assert message.payload["payload"] == body["payload"]
            message.ack()
    writer.join()
    assert sorted(received) == list(range(sent))


def test_a_full_prefetch_window_hands_the_loop_back_after_one_polling_interval(tmp_path):
    """Celery's loop applies finished tasks' acknowledgements between two drains of 2 s: while the window is full
    the drain returns after a polling interval instead (kombu's own waits the whole timeout)."""
    with Connection("filesystem://", transport="portal.broker:Transport", transport_options={
            "data_folder_in": str(tmp_path), "data_folder_out": str(tmp_path), "store_processed": False,
            "control_folder": str(tmp_path / "control"), "polling_interval": 0.05}) as connection:
        queue = Queue("window", Exchange("window"), "window")  # kombu remembers the test above's "portal" by name
        producer = connection.Producer()
        for index in range(2):
            producer.publish({"index": index}, exchange=queue.exchange, routing_key="window", declare=[queue])
        taken = []
        with connection.Consumer(queue, callbacks=[lambda body, message: taken.append(message)], prefetch_count=1):
            connection.drain_events(timeout=2.0)
            assert len(taken) == 1

            started = monotonic()
            with pytest.raises(socket.timeout):
                connection.drain_events(timeout=2.0)  # the window (1) is full until the first is acknowledged
            assert monotonic() - started < 1.0

            taken[0].ack()
            connection.drain_events(timeout=2.0)
            assert sorted(message.payload["index"] for message in taken) == [0, 1]

            taken[1].ack()
            started = monotonic()
            with pytest.raises(socket.timeout):
                connection.drain_events(timeout=0.3)  # a free window waits its whole timeout, as kombu's does
            assert monotonic() - started >= 0.3
