"""The embedded broker (no REDIS_URL): kombu's file-system transport, with each message written whole before it
can be seen, and a full prefetch window handed back to the worker's loop at once.

kombu writes a message straight into the folder the worker reads, and the worker takes a file as soon as it is listed,
so a worker polling quickly could take one still empty (a JSON error that stops the worker) or, with the folder and
the temporary folder on different file systems, move it away before it was written. Here a message is written under
a name no queue reads, then renamed into place (atomic in one folder): a reader sees a whole message or none.
"""

from __future__ import annotations

import os
import uuid
from time import monotonic
from typing import Any

from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.json import dumps


class Channel(filesystem.Channel):
    def _put(self, queue: str, payload: Any, **kwargs: Any) -> None:
        # kombu's own name, so its readers order and match it as theirs.
        name = f"{round(monotonic() * 1000)}_{uuid.uuid4()}.{queue}.msg"
        partial = os.path.join(self.data_folder_out, f".partial-{uuid.uuid4()}")
        try:
            with open(partial, "wb") as file:
                file.write(dumps(payload).encode())
            os.replace(partial, os.path.join(self.data_folder_out, name))
        except OSError as error:
            raise ChannelError(f"Cannot add message {name!r} to {self.data_folder_out}") from error


class Transport(filesystem.Transport):
    Channel = Channel

    def drain_events(self, connection: Any, timeout: float | None = None) -> None:
        """Celery's loop for a transport that cannot wake it (the worker's `synloop`) applies the acknowledgements of
        the tasks that ended, which free its prefetch window, only between two calls here, each with a 2 s timeout.
        kombu's drain waits out that timeout even when the window is full and nothing can be taken until those
        acknowledgements are applied: a burst larger than the window stalled 2 s each time it filled it. While a
        window is full, the drain is cut to one polling interval (the other channels, remote control's, are still
        polled), so the loop gets its turn at once; otherwise kombu's drain as it is."""
        window_full = any(channel.qos.prefetch_count and not channel.qos.can_consume()
                          for channel in self.channels if channel._consumers)
        if window_full and timeout is not None and self.polling_interval:
            timeout = min(timeout, self.polling_interval)
        super().drain_events(connection, timeout=timeout)
