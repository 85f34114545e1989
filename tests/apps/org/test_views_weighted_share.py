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
