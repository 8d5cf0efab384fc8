"""P.json: the file the engine loads at epoch start (SQL is the interchange form; the engine re-parses it).

Format (version 1)::

    {
      "version": 1,
      "generated_at": "2026-10-21T23:59:00",       # when the predictor ran (local clock)
      "epoch_start": "2026-10-22T00:00:00",        # start of the epoch P is for (log clock); null if unknown
      "epoch_hours": 24,
      "s_estimate": 76,                            # expected number of statements in the epoch (stream length S)
      "rho_estimate": 0.64,                        # expected share of those statements whose key is in P:
                                                   # measured by predicting each of the last 7 epochs from
                                                   # the ones before (model estimate when history is short;
                                                   # stats.rho_model always holds the model's figure)
      "threshold": 0.41,                           # the expected-utility cut-off used
      "queries": [
        {"sql": "SELECT COUNT(*) FROM adult WHERE race = 1",
         "canonical_key": "SELECT COUNT(*) FROM adult WHERE race = 1",   # the predictor's identity (may be null)
         "score": 0.98,                            # probability that the query arrives in the epoch
         "template": "SELECT COUNT(*) FROM adult WHERE race = $1",
         "source": "recurring",                    # recurring | progression | declared | snapshot
         "schedule": "daily"}
      ],
      "stats": {...}                               # free-form training statistics, for humans
    }

Consumers must ignore unknown keys. ``queries`` is sorted by descending score, declared templates first.
"""

from __future__ import annotations

import json
import os
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any

from predictor.predict import PredictedQuery, PredictionSet

VERSION = 1


def to_json(pset: PredictionSet) -> dict[str, Any]:
    return {
        "version": VERSION,
        "generated_at": pset.generated_at.isoformat(),
        "epoch_start": pset.epoch_start.isoformat() if pset.epoch_start else None,
        "epoch_hours": pset.epoch_hours,
        "s_estimate": int(pset.s_estimate),
        "rho_estimate": float(pset.rho_estimate),
        "threshold": float(pset.threshold),
        "queries": [
            {
                "sql": q.sql,
                "canonical_key": q.canonical_key,
                "score": q.score,
                "template": q.template,
                "source": q.source,
                "schedule": q.schedule,
            }
            for q in pset.queries
        ],
        "stats": pset.stats,
    }


def write_prediction(pset: PredictionSet, path: str | Path) -> None:
    """Write P.json atomically (a reader never sees a half-written file)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".P.", suffix=".json", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(to_json(pset), f, indent=2, default=str)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load_prediction(path: str | Path) -> PredictionSet:
    """Read P.json back (the engine may also read the JSON directly: only ``queries[].sql`` is required)."""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    if data.get("version") != VERSION:
        raise ValueError(f"{path}: unsupported P.json version {data.get('version')!r}")
    queries = [
        PredictedQuery(
            q["sql"],
            q.get("canonical_key") or "",
            float(q.get("score", 1.0)),
            q.get("template", ""),
            q.get("source", ""),
            q.get("schedule", ""),
        )
        for q in data.get("queries", [])
    ]
    start = data.get("epoch_start")
    return PredictionSet(
        epoch_start=datetime.fromisoformat(start) if start else None,
        epoch_hours=float(data.get("epoch_hours", 24)),
        queries=queries,
        s_estimate=int(data.get("s_estimate", 0)),
        rho_estimate=float(data.get("rho_estimate", 0.0)),
        threshold=float(data.get("threshold", 0.0)),
        generated_at=datetime.fromisoformat(data["generated_at"])
        if data.get("generated_at")
        else datetime.now(),
        stats=dict(data.get("stats", {})),
    )
