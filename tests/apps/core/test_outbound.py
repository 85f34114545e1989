"""apps/core/outbound.post against a local receiver: a receiver answering a byte at a time is cut at the one
deadline (each byte alone would beat the socket's own timeout), and a prompt answer is read whole."""

import time

import pytest

from apps.core import outbound
from tests.receiver import receiver


@pytest.fixture(autouse=True)
def loopback(settings):
    settings.NOTIFICATIONS_ALLOW_PRIVATE = True  # the receiver listens on 127.0.0.1


def test_an_answer_dripped_a_byte_at_a_time_is_cut_at_the_deadline():
    with receiver(drip=0.3) as slow:
        started = time.monotonic()
        with pytest.raises(TimeoutError):
            outbound.post(slow.url, b"{}", headers={"Content-Type": "application/json"}, timeout=1)
        assert time.monotonic() - started < 2  # about 40 bytes 0.3 s apart would take 12 s
    assert len(slow.received) == 1


def test_a_prompt_answer_is_read_whole():
    with receiver(503) as hook:
        answer = outbound.post(hook.url, b"{}", headers={"Content-Type": "application/json"}, timeout=1)
    assert (answer.status, answer.body) == (503, "receiver trouble")
    assert hook.received[0].body == b"{}"
