"""Subprocess for the crash test: answers a stream through a PostgreSQL ledger, printing each answer
(key, value) only after ``Engine.answer`` returned, until it is killed."""

from __future__ import annotations

import sys

from engine_helpers import CATALOG, make_hist, plan, range_sqls

from lapras import Engine, EngineSettings, HistogramExactSource, PostgresLedger, Prediction


def main() -> None:
    dsn, seed = sys.argv[1], int(sys.argv[2])
    exact = HistogramExactSource({"t": (("a", "b", "c"), make_hist())})
    preds = [q for s in range_sqls(6, seed=0) for q in plan(s).queries]
    eng = Engine(CATALOG, PostgresLedger(dsn), exact,
                 EngineSettings(split="equal", stream_length=60, joint_max_cells=0, epoch="manual"),
                 predictions=lambda _catalog: Prediction(preds, 60, 0.3))
    # Repeats of earlier statements are mixed in: they must come back unchanged.
    sqls = range_sqls(40, seed=seed) + range_sqls(20, seed=0)
    print("ready", flush=True)
    for s in sqls:
        p = plan(s)
        try:
            a = eng.answer(p, "crash")
        except Exception as exc:  # noqa: BLE001 - refusals are part of the stream
            print("refused", getattr(exc, "sqlstate", "?"), flush=True)
            continue
        print("answer", p.queries[0].key, repr(float(a.values[0])), flush=True)
    print("done", flush=True)


if __name__ == "__main__":
    main()
