from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from kubernetes import config

from worker.cluster_check import FAIL, Check, render, run_checks, union
from worker.gateway import api_client_from_settings
from worker.permissions import COMPONENTS, NAMESPACED


class Command(BaseCommand):
    help = ("Check the configured cluster for what the portal needs: Kubernetes and Kueue versions, Kueue's CRDs, "
            "API and Configuration, the visibility API, the portal's permissions, an ingress class. Exits 1 on any "
            "failed check.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--component", choices=[*dict.fromkeys([*COMPONENTS, *NAMESPACED]), "all"],
                            default="all",
                            help="whose permissions to review: run it with that component's credentials "
                                 "(default: all, for one account that does everything); with LEADER_ELECTION on, "
                                 "the watcher's and beat's Lease in PORTAL_NAMESPACE too")

    def handle(self, *args: object, component: str = "all", **options: object) -> None:
        if component == "all":
            permissions = union(*COMPONENTS.values())
            namespaced = list(dict.fromkeys(p for group in NAMESPACED.values() for p in group))
        else:
            permissions, namespaced = list(COMPONENTS.get(component, ())), list(NAMESPACED.get(component, ()))
        if not settings.LEADER_ELECTION:
            namespaced = []  # one watcher and one beat: no Lease
        try:
            checks = run_checks(api_client_from_settings(), permissions, namespaced=namespaced,
                                namespace=settings.PORTAL_NAMESPACE)
        except (config.ConfigException, OSError) as exc:
            checks = [Check(FAIL, "Credentials", f"no cluster credentials: {exc}",
                            "set KUBECONFIG, or run in a pod with a service account token mounted")]
        self.stdout.write(render(checks))
        failed = sum(check.failed for check in checks)
        if failed:
            raise CommandError(f"{failed} check{'s' if failed != 1 else ''} failed.")
        self.stdout.write(self.style.SUCCESS("The cluster is ready for the portal."))
