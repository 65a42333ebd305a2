"""TechEmpower's six test types through Django's ORM, as its public requirements describe them:
/json, /db, /queries?queries=N (N clamped to 1..500), /fortunes (the fortune added at request
time, sorted by message, escaped by the template), /updates?queries=N, /plaintext.

The tables come from `scripts/postgres techempower --url URL` (or `start --techempower`). A
request the database cannot serve answers 503 and logs one line (PostgreSQL's refusal reads
"too many clients already", which mysite/*.tuner.toml name), not a traceback.
"""

import functools
import random
import sys
from collections.abc import Callable

from django.db import DatabaseError, transaction
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

from techempower.models import Fortune, World

WORLD_ROWS = 10_000
HIGHEST_NUMBER = 10_000
MAX_QUERIES = 500
HELLO = "Hello, World!"
EXTRA_FORTUNE = "Additional fortune added at request time."
SEED_HINT = "seed it once with `scripts/postgres techempower --url URL`"

View = Callable[[HttpRequest], HttpResponse]


def uses_database(view: View) -> View:
    """The view, answering 503 with one logged line when the database cannot serve it."""

    @functools.wraps(view)
    def guarded(request: HttpRequest) -> HttpResponse:
        try:
            return view(request)
        except DatabaseError as error:
            text = " ".join(str(error).split())
            hint = f": {SEED_HINT}" if "does not exist" in text else ""
            line = f"mysite: database error: {text[:200]}{hint}"
            print(line, file=sys.stderr, flush=True)
            return JsonResponse({"error": line}, status=503)

    return guarded


def query_count(raw: str | None) -> int:
    """Missing or not a number is 1, below 1 is 1, above 500 is 500."""
    try:
        count = int(raw) if raw is not None else 1
    except ValueError:
        return 1
    return min(max(count, 1), MAX_QUERIES)


def world_ids(count: int) -> list[int]:
    """Distinct ids: an update of the same row twice would answer a value no longer there."""
    return random.sample(range(1, WORLD_ROWS + 1), count)


def read_worlds(ids: list[int]) -> list[World]:
    return [World.objects.get(id=ident) for ident in ids]  # one query per row, as required


def as_dict(world: World) -> dict[str, int]:
    return {"id": world.id, "randomNumber": world.randomnumber}


def json_serialization(request: HttpRequest) -> HttpResponse:
    return JsonResponse({"message": HELLO})


def plaintext(request: HttpRequest) -> HttpResponse:
    return HttpResponse(HELLO, content_type="text/plain")


@uses_database
def single_query(request: HttpRequest) -> HttpResponse:
    return JsonResponse(as_dict(read_worlds(world_ids(1))[0]))


@uses_database
def multiple_queries(request: HttpRequest) -> HttpResponse:
    worlds = read_worlds(world_ids(query_count(request.GET.get("queries"))))
    return JsonResponse([as_dict(world) for world in worlds], safe=False)


@uses_database
def fortunes(request: HttpRequest) -> HttpResponse:
    every = [*Fortune.objects.all(), Fortune(id=0, message=EXTRA_FORTUNE)]
    every.sort(key=lambda fortune: fortune.message)
    return render(request, "techempower/fortunes.html", {"fortunes": every})


@uses_database
def updates(request: HttpRequest) -> HttpResponse:
    count = query_count(request.GET.get("queries"))
    with transaction.atomic():
        worlds = read_worlds(world_ids(count))
        for world in worlds:
            world.randomnumber = random.randint(1, HIGHEST_NUMBER)
        # In id order: two requests updating the same rows lock them in the same order.
        World.objects.bulk_update(sorted(worlds, key=lambda w: w.id), ["randomnumber"])
    return JsonResponse([as_dict(world) for world in worlds], safe=False)
