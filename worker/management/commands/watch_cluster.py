import signal

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from apps.core.metrics import serve_metrics
from worker.gateway import gateway
from worker.watcher import Watcher


class Command(BaseCommand):
    help = "Mirror the cluster into the database until stopped: Jobs, Kueue Workloads, queues, queue positions."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--resync-seconds", type=float, default=300.0, help="full relist period")
        parser.add_argument("--positions-seconds", type=float, default=2.0, help="queue position refresh period")

    def handle(self, *args: object, resync_seconds: float = 300.0, positions_seconds: float = 2.0,
               **options: object) -> None:
        serve_metrics(settings.WATCHER_METRICS_PORT)
        watcher = Watcher(gateway(), resync_seconds=resync_seconds, positions_seconds=positions_seconds)
        signal.signal(signal.SIGTERM, lambda *_: watcher.stop())
        signal.signal(signal.SIGINT, lambda *_: watcher.stop())
        watcher.start()
        self.stdout.write("watch_cluster: watching Jobs, Workloads, ClusterQueues, LocalQueues and Cohorts")
        watcher.stopping.wait()
