"""P for an epoch: the predicted queries as canonical linear queries, with S and the expected overlap, read
from a P.json file or planned from SQL texts."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import parser as sqlparser
from parser.model.linear import LinearQuery
from parser.model.schema import Catalog
from parser.semantics.zoned_text import planned_in_zone


@dataclass(frozen=True)
class Prediction:
    """The predictor's output for an epoch: P as canonical linear queries, S and the expected overlap."""

    queries: Sequence[LinearQuery] = ()
    s_estimate: int | None = None
    rho_estimate: float | None = None
    source: str = ""  # where P came from, for EXPLAIN: a file, declared templates, the proxy's history
    statements: tuple[tuple[str, ...], ...] = ()
    """Per predicted statement, the keys of its queries: under ``bounding = "statement"`` P's release bounds
    units per region of the cells a statement reads (``p_workloads``); empty: one group per marginal."""


def load_prediction(path: str | Path, catalog: Catalog) -> Prediction:
    """Read P.json and re-parse each SQL through the parser into canonical linear queries (bad SQL skipped)."""
    doc = json.loads(Path(path).read_text())
    return prediction_from_sql([item["sql"] for item in doc.get("queries", [])], doc.get("s_estimate"),
                               doc.get("rho_estimate"), catalog, f"prediction file {Path(path).name}")


def prediction_from_sql(sqls: Sequence[str], s_estimate: int | None, rho_estimate: float | None,
                        catalog: Catalog, source: str = "") -> Prediction:
    """P from SQL texts, each planned into canonical linear queries (SQL the parser refuses is skipped)."""
    qs: dict[str, LinearQuery] = {}
    statements: list[tuple[str, ...]] = []
    for sql in sqls:
        try:
            with planned_in_zone(sql) as text:  # learnt from a session in a zone: its days, not UTC's
                plan = sqlparser.plan_query(text, catalog)
        except Exception:  # noqa: BLE001 - a query the parser refuses cannot be predicted
            continue
        keys = tuple(q.key for q in plan.queries if not q.is_zero)
        for q in plan.queries:
            if not q.is_zero:
                qs.setdefault(q.key, q)
        if keys:
            statements.append(keys)
    return Prediction(tuple(qs.values()), s_estimate, rho_estimate, source, tuple(statements))
