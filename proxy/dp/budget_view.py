"""`SHOW lapras.budget` as a person reads it: the remaining budget first, timestamps as timestamps, what the
accounting figures mean, and the asking user's own activity.

Other analysts' activity (answers served, stream position, refused statements, the allocation's state)
is a side channel between analysts, so only admins (`admin = true` in config.toml) see those operator
figures. The shared remaining budget is shown to everyone: every analyst needs it, and it only moves by
what the mechanism has already released. So is `remaining.fresh_statements` (added by the DP service: the
fresh statements the allocation rule still grants budget to), the same budget counted in statements; under
the smooth allocation rule it also moves with the stream's length, so it tells an analyst roughly how many
statements the epoch has seen.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

ACCOUNTING_NOTES = {
    "gdp": "gdp: releases compose exactly as Gaussian differential privacy (their mu add in quadrature); "
           "epsilon figures are the (epsilon, delta) guarantee of that total mu at the epoch's delta, so "
           "remaining + spent epsilon exceeds the budget: the mu figures are the ones that add up",
    "basic": "basic: every release is charged its own (epsilon, delta) and the charges add up to the budget",
}


def timestamp(seconds: float | None) -> str:
    """Seconds since the epoch as PostgreSQL prints a timestamptz in UTC."""
    if seconds is None:
        return ""
    return dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m-%d %H:%M:%S+00")


def _num(v: object) -> str:
    if isinstance(v, float):
        return f"{v:.6g}"
    return "" if v is None else str(v)


def readable(key: str, value: object) -> str:
    """One report value as a person reads it: ``*_at`` seconds as a UTC timestamp, floats to 6 significant
    digits (0.7000000000000001 prints 0.7), None as empty."""
    if key.endswith("_at") and isinstance(value, int | float) and not isinstance(value, bool):
        return timestamp(float(value))
    return _num(value)


def budget_rows(report: Mapping[str, Any], activity: Mapping[str, float], *, admin: bool,
                units_to_eps: Any = None) -> list[tuple[str, str]]:
    """(key, value) rows for SHOW lapras.budget. `activity` is the user's own (Ledger.user_activity);
    `units_to_eps` converts privacy units to (epsilon, delta) for the user's share."""
    cur: Mapping[str, Any] = report.get("current") or {}
    rows: list[tuple[str, str]] = []
    if not cur:
        return [("epoch", "none open")]
    mode = str(cur.get("accounting", ""))
    rows.append(("remaining.epsilon", _num(cur["remaining"]["epsilon"])))
    rows.append(("remaining.delta", _num(cur["remaining"]["delta"])))
    if "mu" in cur:
        rows.append(("remaining.mu", _num(cur["mu"]["remaining"])))
    rows.append(("budget.epsilon", _num(cur["budget"]["epsilon"])))
    rows.append(("budget.delta", _num(cur["budget"]["delta"])))
    if "mu" in cur:
        rows.append(("budget.mu", _num(cur["mu"]["total"])))
    rows.append(("spent.epsilon", _num(cur["spent"]["epsilon"])))
    rows.append(("spent.delta", _num(cur["spent"]["delta"])))
    if "mu" in cur:
        rows.append(("spent.mu", _num(cur["mu"]["spent"])))
    # The parts with their own budget (basic composition with the rest): lapras.linear_regression's and DP
    # partition selection's; what each has spent, and how many more new (table, keys, filter) selections the
    # latter admits this epoch.
    for part in ("regression", "partition"):
        own = cur.get(f"{part}_budget") or {}
        if not own.get("epsilon"):
            continue
        spent = cur[f"{part}_spent"]
        for key, value in (("budget.epsilon", own["epsilon"]), ("budget.delta", own["delta"]),
                           ("spent.epsilon", spent["epsilon"]), ("spent.delta", spent["delta"])):
            rows.append((f"{part}.{key}", _num(value)))
        if part == "partition":
            rows.append(("partition.selections_left", _num(spent["selections_left"])))
    rows.append(("epoch", _num(cur.get("epoch"))))
    rows.append(("epoch.started_at", timestamp(cur.get("started_at"))))
    if "matrix_mechanism" in cur:  # released | pending (being prepared; its budget share reserved) | none
        rows.append(("epoch.release_of_P", _num(cur["matrix_mechanism"])))
    rows.append(("accounting", mode))
    rows.append(("accounting.explained", ACCOUNTING_NOTES.get(mode, "")))
    if activity:
        rows.append(("you.answers_released", _num(int(activity.get("answers", 0)))))
        rows.append(("you.fresh_answers", _num(int(activity.get("fresh", 0)))))
        units = float(activity.get("units", 0.0))
        if units_to_eps is not None:
            eps, delta = units_to_eps(units)
            rows.append(("you.spent.epsilon", _num(float(eps))))
            rows.append(("you.spent.delta", _num(float(delta))))
        if "mu" in cur:
            rows.append(("you.spent.mu", _num(units ** 0.5)))
    if admin:
        shown = {"remaining", "budget", "spent", "mu", "epoch", "started_at", "accounting", "matrix_mechanism"}
        extra = {k: v for k, v in cur.items() if k not in shown}
        for key, value in flatten(extra, "operator."):
            rows.append((key, timestamp(value) if key.endswith("_at") else _num(value)))
        for key, value in flatten({k: v for k, v in report.items() if k != "current"}, "operator."):
            rows.append((key, _num(value)))
    return rows


def flatten(tree: Mapping[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """Nested report -> (dotted key, value) pairs, in report order (the CLI's `budget` listing)."""
    out: list[tuple[str, Any]] = []
    for k, v in tree.items():
        if isinstance(v, Mapping):
            out.extend(flatten(v, f"{prefix}{k}."))
        else:
            out.append((f"{prefix}{k}", v))
    return out
