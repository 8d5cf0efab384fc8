"""The `events` demo table: a seeded event log generated inside PostgreSQL, never row by row in Python.

Every row is a pure function of its row number, with PostgreSQL's ``hashint8extended`` as the random
source, so the same spec gives the same table on one PostgreSQL and split over shards (a shard generates
the whole stream and keeps the rows of its own users). Users follow a heavy-headed law: a few users have
about 100 times the events of a typical one, as in real event logs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta

import psycopg
from psycopg import sql

EVENTS_ROWS = 200_000
EVENTS_MIN_USERS = 10_000
ROWS_PER_USER = 20
"""Mean events per user when the user count is derived from the row count."""

# The declared public range of `ts` (config.toml): the calendar year 2026, in UTC.
RANGE_START = datetime(2026, 1, 1, tzinfo=UTC)
RANGE_END = datetime(2027, 1, 1, tzinfo=UTC)

# Public value lists with their sampling weights; `amount_*` is the log-normal spend of the kinds that
# carry money (others spend 0), `duration` the mean seconds of an event of that kind.
CATEGORIES: tuple[tuple[str, float, float, float, float], ...] = (
    # name, weight, amount log-mean, amount log-sd (0 = no money), mean duration (s)
    ("page_view", 0.40, 0.0, 0.0, 45.0),
    ("search", 0.20, 0.0, 0.0, 20.0),
    ("add_to_cart", 0.12, 3.4, 0.9, 15.0),
    ("purchase", 0.08, 3.6, 0.9, 120.0),
    ("share", 0.07, 0.0, 0.0, 10.0),
    ("support", 0.05, 0.0, 0.0, 600.0),
    ("signup", 0.05, 0.0, 0.0, 90.0),
    ("refund", 0.03, 3.2, 0.8, 300.0),
)
COUNTRIES: tuple[tuple[str, float], ...] = (
    ("US", 0.24), ("IN", 0.10), ("GB", 0.07), ("DE", 0.07), ("BR", 0.06), ("FR", 0.05), ("CA", 0.05),
    ("JP", 0.04), ("MX", 0.04), ("ES", 0.035), ("IT", 0.035), ("AU", 0.03), ("NL", 0.03), ("KR", 0.025),
    ("PL", 0.025), ("SE", 0.02), ("TR", 0.02), ("ID", 0.02), ("NG", 0.02), ("ZA", 0.02),
)
AMOUNT_MAX = 500
DURATION_MAX = 3600

COLUMNS: tuple[tuple[str, str], ...] = (
    ("user_id", "bigint"), ("ts", "timestamptz"), ("category", "text"), ("country", "text"),
    ("amount", "numeric(10,2)"), ("duration_s", "integer"),
)

# A fixed seed makes the demo table reproducible; it only generates demo rows, never privacy noise.
DEFAULT_SEED = 20_260_601


def generation_day(day: date | None = None) -> datetime:
    """Midnight UTC of ``day`` (default today): the end of a spec's span."""
    d = day or datetime.now(UTC).date()
    return datetime(d.year, d.month, d.day, tzinfo=UTC)


@dataclass(frozen=True)
class EventsSpec:
    """What to generate: row and user counts, the end of the time span, the seed."""

    rows: int = EVENTS_ROWS
    users: int = 0                     # 0: max(10,000, rows / 20)
    end: datetime = field(default_factory=generation_day)
    seed: int = DEFAULT_SEED

    @property
    def n_users(self) -> int:
        return self.users or max(EVENTS_MIN_USERS, self.rows // ROWS_PER_USER)

    @property
    def span(self) -> tuple[datetime, datetime]:
        """[start, end) of `ts`: the declared 2026 range up to the generation day (at least one day)."""
        end = min(max(self.end, RANGE_START + timedelta(days=1)), RANGE_END)
        return RANGE_START, end


def _uniform(stream: int, seed: int, of: str = "e.i") -> str:
    # 53 random bits of a 64-bit hash of the row number: a uniform in (0, 1), never 0 (logs are safe).
    return (f"((hashint8extended({of}, {seed + stream}) & 9007199254740991)::float8 + 0.5)"
            f" / 9007199254740992.0")


def _pick(u: str, items: Sequence[tuple[str, float]]) -> str:
    """SQL choosing one of ``items`` (name, weight) by the uniform ``u``."""
    names = ", ".join("'" + n + "'" for n, _ in items)
    return f"(ARRAY[{names}])[width_bucket({u}, {_array(_edges(items))})]"


def _coprime_multiplier(n: int) -> int:
    m = 1_000_003
    while math.gcd(m, n) != 1:
        m += 2
    return m


def events_select(spec: EventsSpec, keep: str | None = None) -> str:
    """``SELECT user_id, ts, category, country, amount, duration_s`` of the whole event stream.

    ``keep`` is an optional SQL condition on ``user_id`` (a shard keeps the rows of its own users); the
    other columns are only computed for kept rows."""
    n, seed = spec.n_users, spec.seed
    start, end = spec.span
    span_s = int((end - start).total_seconds())
    # user index = floor(n * u^2): the head users get ~1/sqrt(n) of all rows (about 100x a typical user);
    # a multiplier coprime to n scatters them over the id range.
    user = (f"100000 + (LEAST({n - 1}, floor({n} * power({_uniform(1, seed, 'i')}, 2))::bigint)"
            f" * {_coprime_multiplier(n)}) % {n}")
    where = f" WHERE {keep}" if keep else ""
    # OFFSET 0 keeps each layer from being flattened: user_id and the category index are computed once.
    users = (f"SELECT i, ({user})::bigint AS user_id "
             f"FROM generate_series(1::bigint, {spec.rows}::bigint) AS g(i) OFFSET 0")
    kinds = (f"SELECT u.i, u.user_id, width_bucket({_uniform(3, seed, 'u.i')}, "
             f"{_array(_edges([(c[0], c[1]) for c in CATEGORIES]))}) AS k FROM ({users}) AS u{where} OFFSET 0")
    gauss = f"sqrt(-2 * ln({_uniform(4, seed)})) * cos(2 * pi() * {_uniform(5, seed)})"
    log_mean, log_sd, mean_dur = (f"({_array([float(c[j]) for c in CATEGORIES])})[e.k]" for j in (2, 3, 4))
    amount = (f"CASE WHEN {log_sd} = 0 THEN 0 ELSE "
              f"round(LEAST({AMOUNT_MAX}, exp({log_mean} + {log_sd} * {gauss}))::numeric, 2) END")
    duration = f"LEAST({DURATION_MAX}, floor(-ln({_uniform(6, seed)}) * {mean_dur}))::integer"
    # Activity grows over the year (u^0.85 leans towards recent days), as a live product's does.
    ts = (f"timestamptz '{start.isoformat()}' + "
          f"floor(power({_uniform(2, seed)}, 0.85) * {span_s}) * interval '1 second'")
    categories = "ARRAY[" + ", ".join(f"'{c[0]}'" for c in CATEGORIES) + "]"
    country = _pick(_uniform(7, seed, "e.user_id"), COUNTRIES)
    return (f"SELECT e.user_id, {ts} AS ts, ({categories})[e.k] AS category, {country} AS country, "
            f"({amount})::numeric(10,2) AS amount, {duration} AS duration_s FROM ({kinds}) AS e")


def _array(values: Sequence[float]) -> str:
    return "ARRAY[" + ", ".join(repr(round(v, 9)) for v in values) + "]::float8[]"


def _edges(items: Sequence[tuple[str, float]]) -> list[float]:
    total = sum(w for _, w in items)
    out, acc = [], 0.0
    for _, w in items:
        out.append(acc / total)
        acc += w
    return out


def columns_ddl() -> sql.Composable:
    return sql.SQL(", ").join(sql.SQL("{} {} NOT NULL").format(sql.Identifier(c), sql.SQL(t)) for c, t in COLUMNS)


def create_events_table(conn: psycopg.Connection, schema: str = "public", name: str = "events") -> None:
    """CREATE TABLE schema.name with the events columns (the schema is created if missing)."""
    conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
    conn.execute(sql.SQL("CREATE TABLE {}.{} ({})").format(sql.Identifier(schema), sql.Identifier(name),
                                                           columns_ddl()))


def fill_events(conn: psycopg.Connection, spec: EventsSpec, schema: str = "public", name: str = "events",
                keep: str | None = None) -> int:
    """Insert the generated stream (rows passing ``keep`` only) into an existing table; returns the count."""
    target = sql.SQL("{}.{}").format(sql.Identifier(schema), sql.Identifier(name))
    cols = sql.SQL(", ").join(sql.Identifier(c) for c, _ in COLUMNS)
    cur = conn.execute(sql.SQL("INSERT INTO {} ({}) ").format(target, cols) + sql.SQL(events_select(spec, keep)))
    return cur.rowcount


def relation_exists(conn: psycopg.Connection, schema: str, name: str) -> bool:
    """Whether ``schema.name`` exists; the names are compared as stored (bound values, never quoted text)."""
    row = conn.execute("SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n "
                       "ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relname = %s)",
                       (schema, name)).fetchone()
    return bool(row and row[0])


def ensure_events_table(dsn: str, spec: EventsSpec | None = None, schema: str = "public",
                        name: str = "events") -> bool:
    """Create and fill the events table if it is missing; returns True when it was created."""
    spec = spec or EventsSpec()
    with psycopg.connect(dsn) as conn:
        if relation_exists(conn, schema, name):
            return False
        with conn.transaction():
            create_events_table(conn, schema, name)
            fill_events(conn, spec, schema, name)
        conn.execute(sql.SQL("ANALYZE {}.{}").format(sql.Identifier(schema), sql.Identifier(name)))
    return True
