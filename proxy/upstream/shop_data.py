"""The `shop` demo: a star schema in the embedded database. A protected fact table, ``orders`` (one row per
order line; a customer places many: the privacy unit is ``customer_id``), and three public dimension
tables with primary keys: ``products`` (category, unit price), ``stores`` (city, region) and ``calendar``
(one row per day of 2026: month, quarter, weekday, weekend).

Seeded (numpy's generator with a fixed seed): the same tables on every machine and every day. Only used to
fill the embedded demo database (``[tables.orders.load] generator = "shop"``), never an operator's upstream.
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Iterator

import numpy as np
import psycopg
from psycopg import sql

from parser.model.schema import TableSchema

from .events_data import relation_exists

log = logging.getLogger("lapras.demo")

SHOP_SEED = 20_260_701
ORDERS_ROWS = 30_000
CUSTOMERS = 4_000
YEAR = 2026

CATEGORIES = ("toys", "books", "garden", "kitchen", "sports", "music")
REGIONS = (("Seattle", "West"), ("Portland", "West"), ("Denver", "West"), ("Chicago", "Midwest"),
           ("Detroit", "Midwest"), ("Boston", "East"), ("New York", "East"), ("Atlanta", "South"))
PRODUCTS = 40
CHANNELS = ("web", "store", "app")
MAX_QUANTITY = 10
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December")
_DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


def products() -> list[tuple[int, str, str, float]]:
    """(id, name, category, unit_price): 40 products, prices 2.00..99.00 (seeded)."""
    rng = np.random.default_rng(SHOP_SEED + 1)
    out = []
    for i in range(1, PRODUCTS + 1):
        cat = CATEGORIES[(i - 1) % len(CATEGORIES)]
        price = round(float(rng.uniform(2.0, 99.0)), 2)
        out.append((i, f"{cat}-{i:02d}", cat, price))
    return out


def stores() -> list[tuple[int, str, str]]:
    """(id, city, region)."""
    return [(i, city, region) for i, (city, region) in enumerate(REGIONS, start=1)]


def calendar() -> list[tuple[datetime.date, int, int, str, int, str, bool]]:
    """(day, year, month, month_name, quarter, weekday, is_weekend) for every day of the demo year."""
    d, out = datetime.date(YEAR, 1, 1), []
    while d.year == YEAR:
        out.append((d, d.year, d.month, _MONTHS[d.month - 1], (d.month - 1) // 3 + 1, _DAYS[d.weekday()],
                    d.weekday() >= 5))
        d += datetime.timedelta(days=1)
    return out


def orders(n: int = ORDERS_ROWS) -> Iterator[tuple[int, datetime.date, int, int, int, str]]:
    """(customer_id, order_date, product_id, store_id, quantity, channel): customers with a heavy tail of
    frequent buyers, popular products and stores, more orders in December."""
    rng = np.random.default_rng(SHOP_SEED)
    weights = rng.pareto(1.5, CUSTOMERS) + 1.0
    customer = rng.choice(np.arange(1, CUSTOMERS + 1), size=n, p=weights / weights.sum())
    day_w = np.ones(365)
    day_w[334:] = 2.0  # December
    day = rng.choice(365, size=n, p=day_w / day_w.sum())
    prod_w = 1.0 / np.arange(1, PRODUCTS + 1) ** 0.8
    product = rng.choice(np.arange(1, PRODUCTS + 1), size=n, p=prod_w / prod_w.sum())
    store_w = np.array([5, 3, 2, 4, 1, 4, 6, 2], dtype=float)
    store = rng.choice(np.arange(1, len(REGIONS) + 1), size=n, p=store_w / store_w.sum())
    quantity = np.clip(rng.geometric(0.45, n), 1, MAX_QUANTITY)
    channel = rng.choice(len(CHANNELS), size=n, p=[0.5, 0.3, 0.2])
    start = datetime.date(YEAR, 1, 1)
    for c, d, p, s, q, ch in zip(customer.tolist(), day.tolist(), product.tolist(), store.tolist(),
                                 quantity.tolist(), channel.tolist(), strict=True):
        yield (int(c), start + datetime.timedelta(days=int(d)), int(p), int(s), int(q), CHANNELS[ch])


_DIMENSIONS = (
    ("products", "id integer PRIMARY KEY, name text NOT NULL, category text NOT NULL, unit_price numeric(10,2) NOT NULL",
     products),
    ("stores", "id integer PRIMARY KEY, city text NOT NULL, region text NOT NULL", stores),
    ("calendar", "day date PRIMARY KEY, year integer NOT NULL, month integer NOT NULL, month_name text NOT NULL, "
                 "quarter integer NOT NULL, weekday text NOT NULL, is_weekend boolean NOT NULL", calendar),
)
ORDER_COLUMNS = (("customer_id", "bigint"), ("order_date", "date"), ("product_id", "integer"),
                 ("store_id", "integer"), ("quantity", "integer"), ("channel", "text"))


def create_dimensions(conn: psycopg.Connection, schema: str) -> None:
    """The public dimension tables, with their primary keys and rows, in ``schema`` (those missing)."""
    conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
    for name, ddl, rows in _DIMENSIONS:
        if relation_exists(conn, schema, name):
            continue
        ident = sql.SQL("{}.{}").format(sql.Identifier(schema), sql.Identifier(name))
        conn.execute(sql.SQL("CREATE TABLE {} ({})").format(ident, sql.SQL(ddl)))
        with conn.cursor().copy(sql.SQL("COPY {} FROM STDIN").format(ident)) as cp:
            for dim_row in rows():
                cp.write_row(dim_row)


def create_orders(conn: psycopg.Connection, schema: str, name: str) -> None:
    cols = sql.SQL(", ").join(sql.SQL("{} {} NOT NULL").format(sql.Identifier(c), sql.SQL(t)) for c, t in ORDER_COLUMNS)
    conn.execute(sql.SQL("CREATE TABLE {}.{} ({})").format(sql.Identifier(schema), sql.Identifier(name), cols))


def fill_orders(conn: psycopg.Connection, schema: str, name: str) -> None:
    names = sql.SQL(", ").join(sql.Identifier(c) for c, _ in ORDER_COLUMNS)
    with conn.cursor().copy(sql.SQL("COPY {}.{} ({}) FROM STDIN").format(
            sql.Identifier(schema), sql.Identifier(name), names)) as cp:
        for row in orders():
            cp.write_row(row)


def ensure_shop_tables(dsn: str, table: TableSchema) -> bool:
    """Create and fill the fact table ``table`` (the shop's orders) and, beside it in its schema, the public
    dimensions if missing; True when the fact table was created."""
    with psycopg.connect(dsn) as conn:
        created = False
        with conn.transaction():
            create_dimensions(conn, table.schema)
            if not relation_exists(conn, table.schema, table.name):
                create_orders(conn, table.schema, table.name)
                fill_orders(conn, table.schema, table.name)
                created = True
                log.info("generated %d shop orders into %s", ORDERS_ROWS, table.qualified_name)
        if created:
            conn.execute(sql.SQL("ANALYZE {}.{}").format(sql.Identifier(table.schema), sql.Identifier(table.name)))
    return created
