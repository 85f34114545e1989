"""gunicorn's settings for the web process: the one place that says how the portal is served. gunicorn reads this file
from its working directory however it is started (make run, the image, compose, the manifests), and each of those
passes only --bind. Why threads, and what each figure is for: docs/architecture.md, Serving the portal.
portal/gunicorn_hooks.py holds what gunicorn does besides serving."""

import os

from portal.gunicorn_hooks import answer_limits_as_json, load_views

# Threads, not one request per process: a log follow (`gpu logs -f`) is a response that lasts up to an hour and
# sleeps most of that time, so each one holds a thread, never a whole worker; pages, the API and the other follows go
# on in the other threads. Two processes use both cores of a small machine (the GIL lets one thread of each run
# Python at a time); WEB_THREADS bounds the requests, follows included, one process serves at once.
worker_class = "gthread"
workers = int(os.environ.get("WEB_CONCURRENCY", "2"))
threads = int(os.environ.get("WEB_THREADS", "100"))

# For gthread this is how long a worker process may go without telling the master it is alive (its main loop does,
# whatever its threads are doing): a hung process is replaced, while a request, a stream, may take as long as it
# needs. (The sync worker class read it as a limit on every request: that cut follows after 30 s.)
timeout = int(os.environ.get("WEB_TIMEOUT", "30"))
# On a restart, requests in flight get this long to finish; follows are cut then and `gpu logs -f` says so.
graceful_timeout = 30
# Seconds a kept-alive connection (a browser's, a proxy's) may wait for its next request; it waits in the worker's
# poller, not in a thread. Longer than the pages' 5 s polls and a proxy's usual 60 s idle timeout, so the server never
# closes a connection just as its client sends the next request on it (a reset the client sees as an error).
keepalive = 75
accesslog = "-"
# gunicorn 25.1 and later open a control socket in $HOME (read-only in the image; shared by every gunicorn of a user
# elsewhere); the portal is managed by signals, its supervisor and the orchestrator, not through it.
control_socket_disable = True

# Every thread of a worker shares that process's pool of PostgreSQL connections (portal/settings.py): on two cores a
# process has no use for more than a few at once, and replicas x workers x this must fit PostgreSQL's max_connections
# beside the other processes. The default here applies to the web only, the other processes keep a connection each.
# No preload_app: each worker builds its own pool after the fork.
os.environ.setdefault("DATABASE_POOL_SIZE", "8")


def post_worker_init(worker):
    answer_limits_as_json(worker)
    load_views(worker)
