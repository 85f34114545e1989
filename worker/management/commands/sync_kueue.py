from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.org import services as org_services
from worker.gateway import ClusterError, gateway
from worker.kueue_sync import as_yaml, desired_from_database, namespace_rule_skips, reconcile, without_skipped


class Command(BaseCommand):
    help = "Reconcile Kueue's objects with the organisation once and print what changed (--dry-run: print YAML)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dry-run", action="store_true",
                            help="print every desired object as a YAML stream without contacting a cluster")

    def handle(self, *args: object, dry_run: bool = False, **options: object) -> None:
        if dry_run:
            desired = desired_from_database()
            skips = namespace_rule_skips(desired)
            self.stdout.write(as_yaml(without_skipped(desired, skips)), ending="")
            for skip in skips:
                self.stderr.write(f"Project {skip.project}: {skip.reason}")
            return
        run = org_services.kueue_sync_claim()
        if run is None:
            raise CommandError("Another reconcile is running; try again in a moment.")
        try:
            result = reconcile(gateway(), desired_from_database())
        except ClusterError as error:
            org_services.kueue_sync_finish(run=run, changes=[], error=error.describe())
            if error.unreachable:
                raise CommandError(error.message) from error
            raise CommandError(f"The cluster refused the change: {error.message}") from error
        org_services.kueue_sync_finish(run=run, changes=result.changes, project_errors=result.problems)
        for change in result.changes:
            self.stdout.write(change)
        self.stdout.write(self.style.SUCCESS(f"{len(result.changes)} change(s)."))
        for problem in result.problems:
            self.stderr.write(problem)
        if result.problems:
            count = len(result.problems)
            raise CommandError(f"{count} left out or not yet as intended (listed above); the rest was reconciled.")
