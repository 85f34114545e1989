import os
import signal
import sys

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from apps.core.metrics import serve_metrics
from worker.gateway import gateway
from worker.leader import elector_from_settings
from worker.watcher import Watcher
from worker.watcher_process import WatcherProcess


class Command(BaseCommand):
    help = ("Mirror the cluster into the database until stopped: Jobs, Kueue Workloads, queues, queue positions. With "
            "LEADER_ELECTION on, only while this process holds the watcher's Lease.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--resync-seconds", type=float, default=300.0, help="full relist period")
        parser.add_argument("--positions-seconds", type=float, default=2.0, help="queue position refresh period")

    def handle(self, *args: object, resync_seconds: float = 300.0, positions_seconds: float = 2.0,
               **options: object) -> None:
        watcher = Watcher(gateway(), resync_seconds=resync_seconds, positions_seconds=positions_seconds,
                          freeze_heap=True)
        process = WatcherProcess(watcher, elector_from_settings("watcher"))
        serve_metrics(settings.WATCHER_METRICS_PORT, probes=process.probes())
        signal.signal(signal.SIGTERM, lambda *_: process.stop())
        signal.signal(signal.SIGINT, lambda *_: process.stop())
        if process.elector is not None:
            self.stdout.write(f"watch_cluster: campaigning for {process.elector}; the leader watches the cluster")
        else:
            self.stdout.write("watch_cluster: watching Jobs, Workloads, ClusterQueues, LocalQueues and Cohorts")
        if process.run():
            self.stderr.write("watch_cluster: lost the lease; exiting so that a fresh process campaigns again")
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(1)  # no cleanup: none of the old watcher's threads may write again
