from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.org import services as org_services
from worker.gateway import ClusterError, gateway
from worker.kueue_sync import as_yaml, desired_from_database, reconcile


class Command(BaseCommand):
    help = "Reconcile Kueue's objects with the organisation once and print what changed (--dry-run: print YAML)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dry-run", action="store_true",
                            help="print every desired object as a YAML stream without contacting a cluster")

    def handle(self, *args: object, dry_run: bool = False, **options: object) -> None:
        if dry_run:
            self.stdout.write(as_yaml(desired_from_database()), ending="")
            return
        run = org_services.kueue_sync_claim()
        if run is None:
            raise CommandError("Another reconcile is running; try again in a moment.")
        try:
            result = reconcile(gateway(), desired_from_database())
        except ClusterError as error:
            org_services.kueue_sync_finish(run=run, changes=[], error=f"{error.status} {error.reason}: {error.message}")
            raise CommandError(f"The cluster refused the change: {error.message}") from error
        org_services.kueue_sync_finish(run=run, changes=result.changes)
        for change in result.changes:
            self.stdout.write(change)
        self.stdout.write(self.style.SUCCESS(f"{len(result.changes)} change(s)."))
