from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("workloads", "0020_idle_warning_minutes"),
    ]

    operations = [
        migrations.AddField(
            model_name="workload",
            name="gpu_fraction",
            field=models.DecimalField(blank=True, decimal_places=2, max_digits=3, null=True),
        ),
    ]
