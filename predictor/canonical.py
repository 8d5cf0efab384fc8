"""A statement's identity: its canonical key (what recall, precision and P membership compare).

``canonical_key(sql, catalog)`` uses the parser's canonical linear queries when a catalog is given and the
parser's ``plan_query`` is available and accepts the statement (two texts denoting the same vectors then
share a key, e.g. ``BETWEEN 30 AND 39`` and ``>= 30 AND < 40``); otherwise the sqlglot normalisation of
:mod:`predictor.templates`. Both are pure functions of the text: canonicalising the same statement twice
gives the same key.
"""

from __future__ import annotations

from functools import lru_cache

from parser import plan_query
from parser.model.schema import Catalog
from parser.semantics.zoned_text import planned_in_zone
from predictor.templates import analyse


@lru_cache(maxsize=200_000)
def _parser_key(sql: str, catalog: Catalog) -> str | None:
    try:
        with planned_in_zone(sql) as text:  # a statement recorded with its session's zone is planned in it
            plan = plan_query(text, catalog)
    except Exception:  # noqa: BLE001 - any refusal means "not the parser's canonical form"
        return None
    keys = sorted({q.key for q in getattr(plan, "queries", ())})
    if not keys:
        return None
    return f"{plan.table}:" + "|".join(keys)


def canonical_key(sql: str, catalog: Catalog | None = None) -> str | None:
    """Canonical identity of one statement, or None when it does not parse."""
    if catalog is not None:
        key = _parser_key(sql, catalog)
        if key is not None:
            return key
    shape = analyse(sql)
    return shape.key if shape is not None else None
