"""SmartNoise SQL's answers to a list of statements, for `dashboard_week.py`'s peer column.

Runs inside its own virtualenv (smartnoise-sql 1.0.10 pins dependencies of its own; see
`dashboard_week.smartnoise_venv`), never in the project's environment, so it imports only smartnoise,
psycopg2 and the standard library. Input (a JSON file named on the command line):

  {"dsn": libpq string, "metadata": SmartNoise metadata dict, "seed": unused (SmartNoise draws from
   OpenDP's CSPRNG), "statements": [{"id": ..., "sql": ..., "epsilon": ..., "delta": ...}, ...]}

Each statement is charged its own (epsilon, delta): SmartNoise's `Privacy.epsilon` is per statistic, so
the statement's cost at epsilon = 1 is asked first (`get_privacy_cost`) and epsilon scaled to make the
whole statement cost what it is given. Every mechanism is Laplace. Output on stdout: one JSON object
{"answers": {id: {"rows": [[...], ...]} or {"error": text}}, "version": ...}.
"""

from __future__ import annotations

import json
import sys
from typing import Any


def main(path: str) -> int:
    import psycopg2
    import snsql
    from snsql import Mechanism, Privacy, Stat
    from snsql.sql.privacy import Mechanisms

    spec = json.loads(open(path).read())
    conn = psycopg2.connect(spec["dsn"])
    conn.autocommit = True
    mechanisms = Mechanisms()
    for stat in (Stat.count, Stat.sum_int, Stat.sum_large_int, Stat.sum_float, Stat.sum_large_float,
                 Stat.threshold):
        mechanisms.map[stat] = Mechanism.laplace
    answers: dict[str, dict] = {}
    for st in spec["statements"]:
        try:
            probe = snsql.from_connection(conn, privacy=Privacy(epsilon=1.0, delta=st["delta"],
                                                                mechanisms=mechanisms),
                                          metadata=spec["metadata"], engine="postgres")
            eps_at_1, _ = probe.get_privacy_cost(st["sql"])
            privacy = Privacy(epsilon=st["epsilon"] / max(eps_at_1, 1e-12), delta=st["delta"],
                              mechanisms=mechanisms)
            reader = snsql.from_connection(conn, privacy=privacy, metadata=spec["metadata"], engine="postgres")
            rows = reader.execute(st["sql"])
            # The first row is the header.
            answers[st["id"]] = {"rows": [[_plain(v) for v in r] for r in rows[1:]],
                                 "cost": list(reader.get_privacy_cost(st["sql"]))}
        except Exception as exc:  # an inexpressible statement is n/a, not a failed run
            answers[st["id"]] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
    import importlib.metadata as md

    print(json.dumps({"answers": answers, "version": md.version("smartnoise-sql")}))
    return 0


def _plain(v: Any) -> object:
    if v is None or isinstance(v, (int, float, str, bool)):
        return v
    try:
        return float(v)  # numpy scalars, Decimal
    except (TypeError, ValueError):
        return str(v)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1]))
