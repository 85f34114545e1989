from django.core.management.base import BaseCommand

from apps.workloads.services import workload_tallies_rebuild


class Command(BaseCommand):
    help = ("Count the workload tallies (per project, pool and status: workloads and GPU units) afresh from the "
            "workloads, replacing the kept figures; writes of workloads wait while it counts. A repair: the database "
            "keeps them by itself (docs/architecture.md, Figures kept rather than counted).")

    def handle(self, *args: object, **options: object) -> None:
        tallies = workload_tallies_rebuild()
        self.stdout.write(self.style.SUCCESS(f"{tallies} workload tallies counted from the workloads."))
