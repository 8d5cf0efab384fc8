"""Subprocess of the regression crash test: answers regression calls through the real endpoint and
ledger, printing each answer only after it returned, until it is killed."""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from lapras.engine import Engine  # noqa: E402
from lapras.exact import PostgresExactSource  # noqa: E402
from lapras.ledger.postgres import PostgresLedger  # noqa: E402
from proxy.config import load_config  # noqa: E402
from proxy.dp.engine_factory import engine_settings  # noqa: E402
from proxy.dp.regression_endpoint import RegressionEndpoint  # noqa: E402

XS = ["age", "education_num", "sex", "race", "capital_gain", "capital_loss", "marital_status", "workclass"]


def main() -> None:
    dsn = sys.argv[1]
    cfg = load_config(str(REPO / "config.toml"))
    engine = Engine(cfg.catalog, PostgresLedger(dsn), PostgresExactSource(dsn),
                    engine_settings(cfg, progress=False))
    endpoint = RegressionEndpoint(cfg, dsn, engine)
    print("ready", flush=True)
    for i in range(12):
        xs = ", ".join(XS[: 1 + i % 4]) if i < 4 else f"{XS[i % 8]}, {XS[(i + 3) % 8]}"
        sql = f"SELECT * FROM lapras.linear_regression('adult', 'hours_per_week', '{xs}', 'adassp', 0.02)"
        try:
            res = endpoint.execute(sql, "crash")
        except Exception as exc:  # noqa: BLE001 - an exhausted part is part of the run
            print("refused", getattr(exc, "sqlstate", "?"), flush=True)
            continue
        print("answer", json.dumps([sql, [list(r) for r in res.rows]]), flush=True)
    print("done", flush=True)


if __name__ == "__main__":
    main()
