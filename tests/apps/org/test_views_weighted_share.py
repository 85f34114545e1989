"""The weights page shows Kueue's current weighted share of each project cohort per pool."""

from __future__ import annotations

import pytest
from django.urls import reverse
from django.utils import timezone

from apps.cluster.models import CohortState
from apps.org.models import NodePool, Project

pytestmark = pytest.mark.django_db


def test_weighted_share_column_is_filled_from_the_cohort_mirror(client_for):
    vision = Project.objects.get(slug="vision")
    for pool, share in (("h100", 350), ("l40s-shared", 0)):
        CohortState.objects.create(name=f"proj-vision-{pool}", project=vision, department=vision.department,
                                   node_pool=NodePool.objects.get(slug=pool), weighted_share=share,
                                   observed_at=timezone.now())
    content = client_for("lead").get(reverse("org:weights")).content.decode()
    row = content[content.index('data-project="vision"'):]
    cell = row[row.index("data-weighted-share"):row.index("</tr>")]
    assert 'data-pool="h100"' in cell and "h100 350" in cell and "l40s-shared 0" in cell
    nlp = content[content.index('data-project="nlp"'):]
    assert "—" in nlp[nlp.index("data-weighted-share"):nlp.index("</tr>")]


def test_weighted_shares_cost_one_query_for_all_rows(client_for, django_assert_num_queries):
    client = client_for("admin")
    with django_assert_num_queries(9) as first:
        client.get(reverse("org:weights"))
    assert any("cluster_cohortstate" in q["sql"] for q in first.captured_queries)


def mirror_share(project: Project, pool: str, share: int) -> None:
    CohortState.objects.create(name=f"proj-{project.slug}-{pool}", project=project, department=project.department,
                               node_pool=NodePool.objects.get(slug=pool), weighted_share=share,
                               observed_at=timezone.now())


def test_the_share_has_its_unit_and_a_formula_that_matches_kueues(client_for):
    vision = Project.objects.get(slug="vision")  # weight 2 on h100 in the demo
    mirror_share(vision, "h100", 350)
    content = client_for("lead").get(reverse("org:weights")).content.decode()
    row = content[content.index('data-project="vision"'):]
    cell = row[row.index("data-weighted-share"):row.index("</tr>")]
    assert "h100 350 ‰" in cell
    assert "borrows above its deserved quota \u00d7 1000 ÷ what the pool's cohort tree can lend, ÷ the weight" in cell
    assert "≈ 700 ‰ borrowed ÷ weight 2" in cell
    assert "usage above deserved divided by weight" not in content
    assert "share-expected" not in cell  # the weight Kueue has is the saved one: nothing to foresee


def test_changing_the_weight_shows_the_share_it_leads_to(client_for):
    vision = Project.objects.get(slug="vision")
    mirror_share(vision, "h100", 350)  # computed by Kueue at weight 2: 700 ‰ borrowed
    quota = vision.quotas.get(node_pool__slug="h100")
    response = client_for("lead").post(reverse("org:weights"), {"quota": quota.pk, "over_quota_weight": "4",
                                                                "version": quota.version}, HTTP_HX_REQUEST="true")
    html = response.content.decode()
    assert "Saved" in html and "h100 350 ‰" in html
    assert 'data-expected="175"' in html and "→ ≈ 175 ‰ at weight 4, once the cluster has it" in html
    quota.refresh_from_db()
    zero = client_for("deptadmin").post(reverse("org:weights"), {"quota": quota.pk, "over_quota_weight": "0",
                                                                 "version": quota.version},
                                        HTTP_HX_REQUEST="true").content.decode()
    assert "→ ≈ ∞ at weight 0" in zero  # Kueue's MaxInt64 for a borrowing cohort of weight 0


@pytest.mark.parametrize(("share", "observed", "weight", "expected"), [
    (350, 2, 4, 175), (350, 2, 2, None), (0, 2, 5, 0), (125, 2, 3, 84), (2**63 - 1, 0, 2, None), (10, 1, 0, 2**63 - 1),
    (None, 2, 3, None),
])
def test_expected_share_follows_kueues_rounding(share, observed, weight, expected):
    from decimal import Decimal

    from apps.org.selectors import WeightedShare

    pool = NodePool.objects.get(slug="h100")
    assert WeightedShare(pool=pool, share=share, observed_weight=Decimal(observed),
                         weight=Decimal(weight)).expected == expected
