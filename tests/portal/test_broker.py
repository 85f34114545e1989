"""The embedded broker (portal/broker.py): a worker polling the folder never takes a message half written."""

from __future__ import annotations

import threading

import pytest
from kombu import Connection


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
