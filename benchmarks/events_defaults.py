"""Which declaration of the shipped `events` demo gives a new user's dashboard the smallest error: per panel
of a typical dashboard, the median relative error against the exact answer over all rows, its bias (the
noise-free bounded answer against the truth) and its noise, for a few candidate declarations of the per-user
bounds (k = ``max_rows_per_unit``, c = ``max_rows_per_group``, g = ``max_groups_per_unit``, B =
``max_sum_per_group`` of amount; docs/bounding.md), at the shipped budget and pacing.

Data: the demo's own event log (``proxy.upstream.events_data``: 200,000 rows, 10,000 users, a heavy head,
timestamps up to ``--end``), generated in an embedded PostgreSQL as ``serve`` does, copied once per
candidate (``events_<name>``, each declared as config.toml declares `events`, with the candidate's bounds).

Answers come from a real ``lapras-proxy serve`` on the shipped config.toml (its epsilon, delta, accounting,
split, S = ``stream_length``), asked the 10 panels of one candidate in a new manual epoch each, as a new user's
first dashboard: with no history to learn from, the shipped proxy paces the first epoch on the configured S
and has no P, which is what ``learn_prediction = learn_stream = false`` give in every epoch. ``--repeats``
epochs per candidate (errors pooled over them). The noise-free answers come from a second proxy on the same
config with epsilon = 1e7 (noise about 1/3,000 of the shipped one, the same bounding). Per panel: the median
over its cells of |answer - exact| / |exact| (cells whose exact value is 0 left out, a missing cell counts
1), the median signed relative bias of the noise-free answer, and the median |answer - noise-free| / |exact|.

Usage: python benchmarks/events_defaults.py [--repeats 2] [--end 2026-12-07] [--only NAME,...] [--add k20c3g12b100,...]
           [--json PATH]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(HERE))

import psycopg  # noqa: E402
import scale  # noqa: E402
import serve  # noqa: E402
from dashboard_week import Exact, _set_key, bounds_toml, cells, rel_errors  # noqa: E402

NOISE_FREE_EPSILON = 1e7


@dataclass(frozen=True)
class Candidate:
    """A declaration of `events`' bounds (None: the key is not set)."""

    name: str
    k: int
    c: int | None = None
    g: int | None = None
    b: float | None = None

    def toml(self) -> str:
        return bounds_toml(self.k, self.c, self.g, "amount", self.b)

    def label(self) -> str:
        def show(v: float | None) -> str:
            return "-" if v is None else f"{v:g}"
        return f"k={self.k} c={show(self.c)} g={show(self.g)} B={show(self.b)}"


def parse_candidate(name: str) -> Candidate:
    """A candidate from its name: ``k20c3g12b100`` (k, then c, g and B when set)."""
    m = re.fullmatch(r"k(\d+)(?:c(\d+))?(?:g(\d+))?(?:b(\d+(?:\.\d+)?))?", name)
    if m is None:
        raise ValueError(f"not a candidate name: {name!r} (k20c3g12b100: k, then c, g, B when set)")
    k, c, g, b = m.groups()
    return Candidate(name, int(k), int(c) if c else None, int(g) if g else None, float(b) if b else None)


def shipped_candidate() -> Candidate:
    """config.toml's own declaration of `events` as it stands."""
    text = (REPO / "config.toml").read_text()
    block = re.search(r"(?ms)^\[tables\.events\]\n(.*?)(?=^\[)", text)
    assert block is not None
    keys = dict(re.findall(r"(?m)^(max_\w+) = ([^#\n]+?)\s*(?:#|$)", block.group(1)))
    b = re.search(r"amount = ([0-9.]+)", keys.get("max_sum_per_group", ""))
    return Candidate("shipped", int(keys["max_rows_per_unit"]),
                     int(keys["max_rows_per_group"]) if "max_rows_per_group" in keys else None,
                     int(keys["max_groups_per_unit"]) if "max_groups_per_unit" in keys else None,
                     float(b.group(1)) if b else None)


CANDIDATES = (
    Candidate("before", 10, None, 12, None),          # the declaration the new-user pass met (k alone)
    Candidate("k20c3g12b100", 20, 3, 12, 100.0),
    Candidate("k50c5g12b200", 50, 5, 12, 200.0),
    Candidate("k50c8g12b200", 50, 8, 12, 200.0),      # shipped since this benchmark
    Candidate("k50c8g24b200", 50, 8, 24, 200.0),
    Candidate("k100c8g12b300", 100, 8, 12, 300.0),
)


def panels(table: str, end: dt.date) -> list[tuple[str, str, int]]:
    """(name, SQL, key columns) of the dashboard over ``table``; the daily panel reads the 30 days before ``end``."""
    t0 = f"'{(end - dt.timedelta(days=30)).isoformat()} 00:00:00+00'"
    t1 = f"'{end.isoformat()} 00:00:00+00'"
    return [
        ("total count", f"SELECT count(*) FROM {table}", 0),
        ("count by day (30 d)", f"SELECT date_trunc('day', ts) AS d, count(*) FROM {table} "
                                f"WHERE ts >= {t0} AND ts < {t1} GROUP BY 1 ORDER BY 1", 1),
        ("count by week", f"SELECT date_trunc('week', ts) AS w, count(*) FROM {table} GROUP BY 1 ORDER BY 1", 1),
        ("count by month", f"SELECT date_trunc('month', ts) AS m, count(*) FROM {table} GROUP BY 1 ORDER BY 1", 1),
        ("count by category", f"SELECT category, count(*) FROM {table} GROUP BY category ORDER BY 1", 1),
        ("count by country", f"SELECT country, count(*) FROM {table} GROUP BY country ORDER BY 1", 1),
        ("count by category, month", f"SELECT category, date_trunc('month', ts) AS m, count(*) FROM {table} "
                                     "GROUP BY 1, 2 ORDER BY 1, 2", 2),
        ("sum(amount) by month", f"SELECT date_trunc('month', ts) AS m, sum(amount) FROM {table} "
                                 "GROUP BY 1 ORDER BY 1", 1),
        ("avg(amount) by category", f"SELECT category, avg(amount) FROM {table} GROUP BY category ORDER BY 1", 1),
        ("distinct users by month", f"SELECT date_trunc('month', ts) AS m, count(DISTINCT user_id) FROM {table} "
                                    "GROUP BY 1 ORDER BY 1", 1),
    ]


def config_text(dsn: str, port: int, candidates: list[Candidate], epsilon: float | None) -> str:
    """The shipped config.toml on ``dsn`` with one copy of its `events` declaration per candidate (bounds
    replaced) and no other table; manual epochs the analyst (admin) starts, no learning (see the docstring)."""
    text = (REPO / "config.toml").read_text()
    events = re.search(r"(?ms)^\[tables\.events\]\n.*?(?=^\[(?!tables\.events[\].])|\Z)", text)
    assert events is not None
    block = re.sub(r"(?ms)^\[tables\.events\.load\]\n.*", "", events.group(0))
    block = re.sub(r"(?m)^#?\s*max_\w+ = [^\n]*\n(\s+#[^\n]*\n)*", "", block)
    text = text.replace('listen = "127.0.0.1:6432"', f'listen = "127.0.0.1:{port}"')
    text = text.replace('dsn = ""', "dsn = " + json.dumps(dsn))
    text = text.replace("admin = false ", "admin = true ", 1)
    demo = r"(tables\.(adult|events|orders)(\.[a-z]+)?|public_tables\.[a-z_]+)"
    text = re.sub(rf"(?ms)^\[{demo}\]\n.*?(?=^\[(?!{demo}\])|\Z)", "", text)
    sets = [("server", "queries_per_minute", "100000000"), ("server", "statement_timeout_s", "600.0"),
            ("privacy", "epoch", '"manual"'), ("lapras", "learn_prediction", "false"),
            ("lapras", "learn_stream", "false")]
    if epsilon is not None:
        sets.append(("privacy", "epsilon", repr(epsilon)))
    for section, key, value in sets:
        text = _set_key(text, section, key, value)
    for cand in candidates:
        decl = block.replace("[tables.events", f"[tables.events_{cand.name}")
        unit = re.search(r"(?m)^privacy_unit = [^\n]*\n", decl)
        assert unit is not None
        decl = decl[:unit.end()] + cand.toml() + decl[unit.end():]
        text += "\n" + decl
    return text


def load(dsn: str, candidates: list[Candidate], end: dt.date) -> int:
    from proxy.upstream.events_data import EventsSpec, ensure_events_table, generation_day

    ensure_events_table(dsn, EventsSpec(end=generation_day(end)))
    with psycopg.connect(dsn, autocommit=True) as conn:
        for c in candidates:
            conn.execute(f"CREATE TABLE events_{c.name} AS SELECT * FROM events")
            conn.execute(f"ANALYZE events_{c.name}")
        row = conn.execute("SELECT count(*), count(DISTINCT user_id) FROM events").fetchone()
        assert row is not None
        return int(row[0])


def ask(conn: psycopg.Connection, sql: str) -> list[tuple[Any, ...]]:
    try:
        return list(conn.execute(sql).fetchall())
    except psycopg.Error as exc:
        print(f"  {exc.sqlstate} {str(exc).splitlines()[0]}: {sql[:90]}", flush=True)
        return []


def run_proxy(dsn: str, work: Path, candidates: list[Candidate], end: dt.date, epsilon: float | None,
              repeats: int) -> dict[str, dict[str, list[list[tuple[Any, ...]]]]]:
    """{candidate: {panel: [answers per repeat]}} from one proxy (a new epoch per candidate and repeat)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DROP SCHEMA IF EXISTS lapras CASCADE")     # a fresh ledger
    port = serve.free_port()
    label = "noise_free" if epsilon else "shipped"
    cfg = work / f"config_{label}.toml"
    cfg.write_text(config_text(dsn, port, candidates, epsilon))
    proxy = scale.Proxy(cfg, work / f"state_{label}", port)
    out: dict[str, dict[str, list[list[tuple[Any, ...]]]]] = {}
    try:
        conn = psycopg.connect(proxy.dsn(), autocommit=True)
        first = True
        for _ in range(repeats):
            for cand in candidates:
                if not first:
                    conn.execute("SELECT lapras.new_epoch()").fetchall()
                first = False
                for name, sql, _keys in panels(f"events_{cand.name}", end):
                    out.setdefault(cand.name, {}).setdefault(name, []).append(ask(conn, sql))
        conn.close()
    finally:
        proxy.stop()
    return out


def signed_bias(noise_free: list[tuple[Any, ...]], exact: list[tuple[Any, ...]], keys: int) -> list[float]:
    got, want = cells(noise_free, keys), cells(exact, keys)
    return [((got.get(k) or 0.0) - w) / abs(w) for k, w in want.items() if w]


def noise_errors(answer: list[tuple[Any, ...]], noise_free: list[tuple[Any, ...]], exact: list[tuple[Any, ...]],
                 keys: int) -> list[float]:
    got, ref, want = cells(answer, keys), cells(noise_free, keys), cells(exact, keys)
    return [abs((got.get(k) or 0.0) - (ref.get(k) or 0.0)) / abs(w) for k, w in want.items() if w]


def measure(dsn: str, candidates: list[Candidate], end: dt.date, repeats: int, work: Path) -> dict[str, Any]:
    exact = Exact(dsn)
    t0 = time.monotonic()
    free = run_proxy(dsn, work, candidates, end, NOISE_FREE_EPSILON, 1)
    print(f"noise-free answers in {time.monotonic() - t0:.0f} s", flush=True)
    t0 = time.monotonic()
    shipped = run_proxy(dsn, work, candidates, end, None, repeats)
    print(f"answers at the shipped budget in {time.monotonic() - t0:.0f} s", flush=True)
    result: dict[str, Any] = {}
    for cand in candidates:
        rows: dict[str, dict[str, float]] = {}
        for name, sql, keys in panels(f"events_{cand.name}", end):
            truth = exact(sql.replace(f"events_{cand.name}", "events"))
            nf = free[cand.name][name][0]
            errs = [e for ans in shipped[cand.name][name] for e in rel_errors(ans, truth, keys)]
            noise = [e for ans in shipped[cand.name][name] for e in noise_errors(ans, nf, truth, keys)]
            rows[name] = {"error": statistics.median(errs), "bias": statistics.median(signed_bias(nf, truth, keys)),
                          "noise": statistics.median(noise), "cells": len(cells(truth, keys))}
        result[cand.name] = {"candidate": asdict(cand), "label": cand.label(), "panels": rows,
                             "median_error": statistics.median(r["error"] for r in rows.values())}
    return result


def table(result: dict[str, Any]) -> str:
    names = list(result)
    panel_names = list(next(iter(result.values()))["panels"])
    head = "| panel | " + " | ".join(f"{n} ({result[n]['label']})" for n in names) + " |"
    out = [head, "|---|" + "---:|" * len(names)]
    for p in panel_names:
        out.append(f"| {p} | " + " | ".join(
            "{error:.1%} ({bias:+.1%}, {noise:.1%})".format(**result[n]["panels"][p]) for n in names) + " |")
    out.append("| **median over panels** | " + " | ".join(f"**{result[n]['median_error']:.1%}**" for n in names)
               + " |")
    return "\n".join(out) + "\n\nEach cell: median error (median signed bias of the noise-free answer, median noise)."


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=2, help="epochs per candidate at the shipped budget")
    ap.add_argument("--end", type=dt.date.fromisoformat, default=dt.datetime.now(dt.UTC).date(),
                    help="the generation day (the data runs up to it; default today, as serve)")
    ap.add_argument("--only", default="", help="comma-separated names of the built-in candidates to keep (default: all and shipped)")
    ap.add_argument("--add", default="", help="more candidates, comma-separated, named k20c3g12b100 (k c g B)")
    ap.add_argument("--json", metavar="PATH")
    a = ap.parse_args(argv)
    shipped = shipped_candidate()
    cands = list(CANDIDATES)
    if all((c.k, c.c, c.g, c.b) != (shipped.k, shipped.c, shipped.g, shipped.b) for c in cands):
        cands.append(shipped)
    if a.only:
        cands = [c for c in cands if c.name in a.only.split(",")]
    cands += [parse_candidate(n) for n in a.add.split(",") if n]
    with tempfile.TemporaryDirectory(prefix="lapras-events-defaults-") as root:
        with serve.embedded_database(Path(root) / "pg", "adult") as dsn:
            t0 = time.monotonic()
            rows = load(dsn, cands, a.end)
            print(f"events: {rows:,} rows up to {a.end} loaded in {time.monotonic() - t0:.0f} s; "
                  f"{len(cands)} candidates, {a.repeats} epoch(s) each", flush=True)
            result = measure(dsn, cands, a.end, a.repeats, Path(root))
    print(table(result))
    if a.json:
        Path(a.json).write_text(json.dumps({"end": a.end.isoformat(), "repeats": a.repeats, "result": result},
                                           indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
