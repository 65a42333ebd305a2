"""TechEmpower's database, as its public requirements describe it: a `World` table of 10,000
rows (`id` 1..10000, `randomNumber` a random integer 1..10000) and a `Fortune` table of the
twelve standard fortunes, one of them a `<script>` tag and one in Japanese, so that a fortunes
page that forgets to escape or to encode shows it.

`seed(url)` creates and fills both, once: run again it leaves the rows there as they are. The
user's one command is `scripts/postgres start --techempower` (or `scripts/postgres techempower
--url URL` for a database already running); apps/te_starlette.py, apps/te_flask.py and the
Django project's TechEmpower views read these tables. The names are quoted, so PostgreSQL keeps
their case, as TechEmpower's own `create-postgres.sql` writes them.
"""

from __future__ import annotations

WORLD_ROWS = 10_000
HIGHEST_NUMBER = 10_000  # randomNumber is drawn from 1..HIGHEST_NUMBER

# The standard fortunes, by id (TechEmpower's requirements, "Test type 4: Fortunes").
FORTUNES: tuple[tuple[int, str], ...] = (
    (1, "fortune: No such file or directory"),
    (2, "A computer scientist is someone who fixes things that aren't broken."),
    (3, "After enough decimal places, nobody gives a damn."),
    (4, "A bad random number generator: 1, 1, 1, 1, 1, 4.33e+67, 1, 1, 1"),
    (5, "A computer program does what you tell it to do, not what you want it to do."),
    (6, "Emacs is a nice operating system, but I prefer UNIX. \u2014 Tom Christaensen"),
    (7, "Any program that runs right is obsolete."),
    (8, "A list is only as strong as its weakest link. \u2014 Donald Knuth"),
    (9, "Feature: A bug with seniority."),
    (10, "Computers make very fast, very accurate mistakes."),
    (11, '<script>alert("This should not be displayed in a browser alert box.");</script>'),
    (12, "\u30d5\u30ec\u30fc\u30e0\u30ef\u30fc\u30af\u306e\u30d9\u30f3\u30c1\u30de\u30fc\u30af"),
)

SCHEMA = """
CREATE TABLE IF NOT EXISTS "World" (
    id integer PRIMARY KEY,
    "randomNumber" integer NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS "Fortune" (
    id integer PRIMARY KEY,
    message varchar(2048) NOT NULL
);
"""
FILL_WORLD = f"""
INSERT INTO "World" (id, "randomNumber")
    SELECT n, 1 + floor(random() * {HIGHEST_NUMBER})::integer
    FROM generate_series(1, {WORLD_ROWS}) AS n
    ON CONFLICT (id) DO NOTHING
"""
FILL_FORTUNE = 'INSERT INTO "Fortune" (id, message) VALUES (%s, %s) ON CONFLICT (id) DO NOTHING'


def seed(url: str) -> str:
    """Create and fill both tables in the database at `url` (postgresql://...); returns what is
    there. psycopg's errors pass through: the caller says them in its own words."""
    import psycopg  # here, not at the top: `scripts/postgres start` alone needs no driver

    with psycopg.connect(url, connect_timeout=10) as connection:
        connection.execute(SCHEMA)
        connection.execute(FILL_WORLD)
        with connection.cursor() as cursor:
            cursor.executemany(FILL_FORTUNE, FORTUNES)
        connection.execute('ANALYZE "World"')
        connection.execute('ANALYZE "Fortune"')
        worlds = connection.execute('SELECT count(*) FROM "World"').fetchone()
        fortunes = connection.execute('SELECT count(*) FROM "Fortune"').fetchone()
    return f"{worlds[0] if worlds else 0} worlds, {fortunes[0] if fortunes else 0} fortunes"
