"""The one naming module: every name the portal gives a Kubernetes object, under the configured prefixes."""

from __future__ import annotations

from apps.core import kueue_names
from apps.core.kueue_names import KueueNames, names
from apps.org.models import NodePool, Project
from apps.workloads.models import Workload


def test_defaults_are_the_documented_contract():
    default = KueueNames()
    assert default.root_cohort("h100") == "portal-h100"
    assert default.department_cohort("research", "h100") == "dept-research-h100"
    assert default.project_cohort("vision", "h100") == "proj-vision-h100"
    assert default.cluster_queue("vision", "h100", guaranteed=True) == "proj-vision-h100-guaranteed"
    assert default.cluster_queue("vision", "h100", guaranteed=False) == "proj-vision-h100-elastic"
    assert default.project_namespace("vision") == "proj-vision"
    assert kueue_names.local_queue("h100", guaranteed=True) == "guaranteed-h100"
    assert kueue_names.local_queue("h100", guaranteed=False) == "elastic-h100"
    assert kueue_names.job_name(42) == "wl-42"


def test_names_honour_the_configured_prefixes(settings):
    settings.KUEUE_ROOT_COHORT_PREFIX = "root-"
    settings.KUEUE_DEPARTMENT_COHORT_PREFIX = "d-"
    settings.KUEUE_PROJECT_PREFIX = "team-"
    configured = names()
    assert configured.root_cohort("h100") == "root-h100"
    assert configured.department_cohort("research", "h100") == "d-research-h100"
    assert configured.cluster_queue("vision", "h100", guaranteed=True) == "team-vision-h100-guaranteed"
    assert configured.project_namespace("vision") == "team-vision"


def test_a_workloads_queue_names_follow_the_configured_prefix(settings, demo):
    settings.KUEUE_PROJECT_PREFIX = "team-"
    workload = Workload(project=Project.objects.get(slug="vision"), node_pool=NodePool.objects.get(slug="h100"),
                        preemptible=True)
    assert workload.queue_name == "elastic-h100"
    assert workload.cluster_queue_name == "team-vision-h100-elastic"
