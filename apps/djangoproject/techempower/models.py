"""TechEmpower's two tables, as `scripts/postgres techempower` creates and fills them (the
project's migrations leave them alone: `managed = False`)."""

from django.db import models


class World(models.Model):
    id = models.IntegerField(primary_key=True)
    randomnumber = models.IntegerField(db_column="randomNumber")

    class Meta:
        managed = False
        db_table = "World"


class Fortune(models.Model):
    id = models.IntegerField(primary_key=True)
    message = models.CharField(max_length=2048)

    class Meta:
        managed = False
        db_table = "Fortune"
