"""What the proxy would release, simulated for statistical tests and benchmarks: a statement's exact
answers from the engine's own exact source on a real PostgreSQL, then many releases of them drawn as the
Gaussian mechanism draws one (seeded), and the SQL PostgreSQL answers MIN and MAX with as the proxy does.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from lapras.exact import PostgresExactSource
from lapras.mechanisms import Cost, Gaussian
from lapras.mechanisms import noise as lattice
from lapras.mechanisms.sensitivity import statement_sensitivity
from parser import plan_query
from parser.plan.quantile import P_EXTREME

_MIN_MAX = re.compile(r"\b(min|max)\s*\(\s*(?:DISTINCT\s+)?((?:[^()]|\([^()]*\))+)\)", re.IGNORECASE)


def as_answered(sql: str) -> str:
    """``sql`` with MIN and MAX spelled as what the proxy answers for them: percentile_disc(P_EXTREME) and
    percentile_disc(1 - P_EXTREME) (parser.plan.quantile)."""
    def one(m: re.Match[str]) -> str:
        p = P_EXTREME if m[1].lower() == "min" else 1 - P_EXTREME
        return f"percentile_disc({p}) WITHIN GROUP (ORDER BY {m[2]})"

    return _MIN_MAX.sub(one, sql)


def released(sql: str, dsn: str, catalog: Any, mu: float, draws: int,
             seed: int) -> tuple[Any, Any, np.ndarray, np.ndarray, np.ndarray]:
    """(plan, table, exact answers, ``draws`` noisy releases (draws x queries), standard error per query) of
    ``sql`` at a grant of ``mu``, calibrated on the statement's sensitivity as a fresh release is."""
    plan = plan_query(sql, catalog)
    table = next(t for t in catalog.tables if t.name == plan.table)
    source = PostgresExactSource(dsn)
    try:
        exact = source.answers(table, plan.queries)
    finally:
        source.close()
    live = np.array([not q.is_zero for q in plan.queries])
    mech = Gaussian.calibrate(Cost(mu=mu), statement_sensitivity(table, [q for q in plan.queries if not q.is_zero]),
                              int(live.sum()))
    scale = np.array([q.sensitivity for q in plan.queries], dtype=np.float64)
    with lattice.simulation(seed):
        unit = Gaussian.draw(draws * len(exact)).reshape(draws, len(exact))
    noisy = mech.release(np.broadcast_to(exact, unit.shape), np.broadcast_to(scale, unit.shape), unit)
    noisy[:, ~live] = 0.0
    return plan, table, exact, noisy, np.where(live, np.sqrt(mech.variance(scale)), 0.0)
