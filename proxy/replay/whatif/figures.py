"""Figures of a what-if replay: one record per (epoch, epsilon, with P or not), per statement kind, and a
short text summary. Errors only: no exact value is ever part of a figure.

Definitions (also in the command's help and the README):
- a statement's error is over its aggregate cells (every group of a GROUP BY): MAE = mean |released -
  exact|; relative error = sum |released - exact| / max(sum |exact|, 1);
- ``within_5pct`` / ``within_10pct``: share of ALL statements (refused ones count as misses) answered with
  a relative error under 5% / 10%;
- ``z_rms``: root mean square of (released - exact) / stated stderr over every query released fresh or
  from P: about 1 when the stated standard errors are honest.
Error figures (``mae``, ``median_rel_error``, ``z_rms``) are given to two significant digits and only
over at least ``MIN_STATEMENTS`` statements (else null), so that no figure gives back an exact answer.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from .simulate import OUTCOMES, EpochRun, Kind, StatementOutcome, WhatIfResult

KINDS: dict[str, Callable[[Kind], bool]] = {
    "recurring": lambda k: k.recurring,
    "ad hoc": lambda k: not k.recurring,
    "count": lambda k: k.aggregate == "count",
    "sum/avg": lambda k: k.aggregate != "count",
    "group by": lambda k: k.grouped,
    "one row": lambda k: not k.grouped,
}


MIN_STATEMENTS = 5
"""Error figures (MAE, median relative error, z_rms) of fewer answered statements are withheld (None): the
MAE and the relative error of one statement give back its exact answer (|exact| = MAE / relative error),
and z times the stated error its exact deviation."""


def _round(x: float | None, digits: int = 4) -> float | None:
    return None if x is None or not math.isfinite(x) else round(x, digits)


def _coarse(x: float) -> float | None:
    """Two significant digits: a figure over several statements that still does not pin any one down."""
    return float(f"{x:.2g}") if math.isfinite(x) else None


def error_figures(outs: Sequence[StatementOutcome]) -> dict[str, Any]:
    """Counts and error figures of a set of statements (already without unsupported ones); the error
    figures only over at least MIN_STATEMENTS answered statements, to two significant digits."""
    counts = Counter(o.outcome for o in outs)
    answered = [o for o in outs if o.outcome != "refused"]
    rel = [o.rel_error for o in answered if o.rel_error is not None]
    mae = [o.abs_error for o in answered if o.abs_error is not None]
    n = len(outs)
    return {
        "statements": n,
        **{k: counts.get(k, 0) for k in OUTCOMES},
        "answered_share": _round(len(answered) / n) if n else None,
        "mae": _coarse(statistics.fmean(mae)) if len(mae) >= MIN_STATEMENTS else None,
        "median_rel_error": _coarse(statistics.median(rel)) if len(rel) >= MIN_STATEMENTS else None,
        "within_5pct": _round(sum(r < 0.05 for r in rel) / n) if n else None,
        "within_10pct": _round(sum(r < 0.10 for r in rel) / n) if n else None,
    }


def _z_rms(outs: Iterable[StatementOutcome]) -> float | None:
    released = [o for o in outs if o.outcome in ("fresh", "from_p") and o.z]
    zs = [z for o in released for z in o.z]
    return _coarse(math.sqrt(statistics.fmean(z * z for z in zs))) if len(released) >= MIN_STATEMENTS else None


def _clock(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 3600:02d}:{s % 3600 // 60:02d}"


def burn_curve(run: EpochRun, points: int = 48) -> list[list[float]]:
    """(hours since the epoch started, share of the query budget spent), at most ``points`` + 2 samples."""
    outs = run.outcomes
    if not outs:
        return []
    step = max(1, len(outs) // points)
    picked = [outs[i] for i in range(0, len(outs), step)] + [outs[-1]]
    return [[round(o.offset_s / 3600, 3), round(o.spent, 4)] for o in picked]


def record(run: EpochRun) -> dict[str, Any]:
    """The ``--json`` record of one (epoch, epsilon, with_p)."""
    outs = [o for o in run.outcomes if o.outcome != "unsupported"]
    refused = [o for o in outs if o.outcome == "refused"]
    rec: dict[str, Any] = {
        "day": run.day, "epoch": run.epoch, "epsilon": run.epsilon, "with_p": run.with_p,
        **error_figures(outs),
        "unsupported": len(run.outcomes) - len(outs),
        "z_rms": _z_rms(outs),
        "s_estimate": run.s_estimate, "p_size": run.p_size, "rho": _round(run.rho),
        "budget_spent": round(run.outcomes[-1].spent, 4) if run.outcomes else None,
        "first_refusal": _clock(refused[0].offset_s) if refused else None,
        "by_kind": {name: error_figures([o for o in outs if o.kind is not None and test(o.kind)])
                    for name, test in KINDS.items()},
        "burn": burn_curve(run),
    }
    return rec


def records(result: WhatIfResult) -> list[dict[str, Any]]:
    return [record(r) for r in result.runs]


def totals(result: WhatIfResult) -> list[dict[str, Any]]:
    """All epochs together, per (epsilon, with_p): the figures of the pooled statements."""
    out = []
    for eps in sorted({r.epsilon for r in result.runs}):
        for with_p in (True, False):
            runs = [r for r in result.runs if r.epsilon == eps and r.with_p == with_p]
            if not runs:
                continue
            outs = [o for r in runs for o in r.outcomes if o.outcome != "unsupported"]
            refusal_days = [r for r in runs if any(o.outcome == "refused" for o in r.outcomes)]
            firsts = [next(o.offset_s for o in r.outcomes if o.outcome == "refused") for r in refusal_days]
            out.append({
                "epsilon": eps, "with_p": with_p, "days": len(runs), **error_figures(outs),
                "z_rms": _z_rms(outs),
                "days_with_refusals": len(refusal_days),
                "median_first_refusal": _clock(statistics.median(firsts)) if firsts else None,
                "by_kind": {name: error_figures([o for o in outs if o.kind is not None and test(o.kind)])
                            for name, test in KINDS.items()},
            })
    return out


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def summary_lines(result: WhatIfResult) -> list[str]:
    """A few sentences a DBA reads first (one per budget), plus what P bought."""
    lines = []
    tot = totals(result)
    for t in tot:
        if not t["with_p"]:
            continue
        rec, adhoc = t["by_kind"]["recurring"], t["by_kind"]["ad hoc"]
        text = (f"at epsilon = {t['epsilon']:g} per {_epoch_word(result)}: {_pct(rec['answered_share'])} of "
                f"recurring statements answered, median relative error {_pct(rec['median_rel_error'])}; "
                f"ad hoc {_pct(adhoc['answered_share'])} answered, median {_pct(adhoc['median_rel_error'])}; "
                f"{_pct(t['within_10pct'])} of all statements within 10%")
        if t["days_with_refusals"]:
            text += (f"; refusals on {t['days_with_refusals']} of {t['days']} {_epoch_word(result)}s "
                     f"(first one at {t['median_first_refusal']} on the median such {_epoch_word(result)})")
        off = next((o for o in tot if o["epsilon"] == t["epsilon"] and not o["with_p"]), None)
        if off is not None:
            text += (f". Without P: {_pct(off['answered_share'])} answered, median relative error "
                     f"{_pct(off['median_rel_error'])}, {_pct(off['within_10pct'])} within 10%")
        lines.append(text + ".")
    return lines


def _epoch_word(result: WhatIfResult) -> str:
    return "day" if result.epoch_hours == 24 else f"{result.epoch_hours:g}-hour epoch"


def format_table(result: WhatIfResult) -> str:
    """Per epoch and budget: counts, error figures, with and without P side by side."""
    head = ["day", "eps", "P", "stmts", "fresh", "from P", "free", "refused", "MAE", "med rel", "<5%", "<10%",
            "spent", "1st refusal"]
    rows = [head]
    for r in records(result):
        rows.append([r["day"], f"{r['epsilon']:g}", "on" if r["with_p"] else "off", str(r["statements"]),
                     str(r["fresh"]), str(r["from_p"]), str(r["free"]), str(r["refused"]),
                     "-" if r["mae"] is None else f"{r['mae']:.3g}", _pct(r["median_rel_error"]),
                     _pct(r["within_5pct"]), _pct(r["within_10pct"]), _pct(r["budget_spent"]),
                     r["first_refusal"] or "-"])
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    lines = ["  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)) for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
