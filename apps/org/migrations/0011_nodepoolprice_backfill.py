"""Every pool priced before prices had a history keeps its price as the first row of its history, valid from the
start: the costs of past months stay what they were."""

from datetime import UTC, datetime

from django.db import migrations

PRICED_FROM_THE_START = datetime(1970, 1, 1, tzinfo=UTC)  # apps.org.models.PRICED_FROM_THE_START when written


def backfill(apps, schema_editor):
    NodePool = apps.get_model("org", "NodePool")
    NodePoolPrice = apps.get_model("org", "NodePoolPrice")
    NodePoolPrice.objects.bulk_create([
        NodePoolPrice(node_pool_id=pool_id, price_per_card_hour=price, valid_from=PRICED_FROM_THE_START)
        for pool_id, price in NodePool.objects.filter(price_per_card_hour__isnull=False).values_list(
            "pk", "price_per_card_hour")])


def forget(apps, schema_editor):
    apps.get_model("org", "NodePoolPrice").objects.all().delete()


class Migration(migrations.Migration):

    dependencies = [
        ("org", "0010_nodepoolprice"),
    ]

    operations = [
        migrations.RunPython(backfill, forget, elidable=False),
    ]
