"""The what-if report: one PNG (per-epoch outcome bars per budget, error distributions per statement kind,
budget burn curves, the summary) and one self-contained HTML page around it with the tables.

Written for the operator's machine only (files mode 0600 in a 0700 directory): errors are derived from
exact answers, and the report is not something to hand to analysts.
"""

from __future__ import annotations

import base64
import html
import json
import os
import textwrap
from pathlib import Path
from typing import Any

import numpy as np

from .figures import KINDS, format_table, records, summary_lines, totals
from .simulate import WhatIfResult

_COLOURS = {"fresh": "tab:red", "from_p": "tab:green", "free": "tab:blue", "refused": "tab:gray"}
_LABELS = {"fresh": "answered fresh", "from_p": "from P", "free": "free repeat", "refused": "refused"}


def _private_write(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.chmod(path, 0o600)


def write_json(result: WhatIfResult, path: str | Path) -> None:
    """One record per (epoch, epsilon, with_p) plus the pooled totals; mode 0600."""
    doc = {"records": records(result), "totals": totals(result), "summary": summary_lines(result),
           "skipped": result.skipped}
    _private_write(Path(path), (json.dumps(doc, indent=1) + "\n").encode())


def plot(result: WhatIfResult, path: Path) -> None:
    import matplotlib  # heavy (about half a second): only a chart needs it

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # after use("Agg"): no display needed

    eps_list = sorted({r.epsilon for r in result.runs})
    days = sorted({(r.epoch, r.day) for r in result.runs})
    fig = plt.figure(figsize=(16, 4.0 * (len(eps_list) + 1) + 1.2))
    grid = fig.add_gridspec(len(eps_list) + 1, 3, height_ratios=[1.0] * len(eps_list) + [1.1])
    x = np.arange(len(days))
    labels = [d[5:] if len(d) == 10 else d for _, d in days]
    for row, eps in enumerate(eps_list):
        ax = fig.add_subplot(grid[row, :2])
        with_p = {r.epoch: r for r in result.runs if r.epsilon == eps and r.with_p}
        without = {r.epoch: r for r in result.runs if r.epsilon == eps and not r.with_p}
        bottom = np.zeros(len(days))
        for name in ("fresh", "from_p", "free", "refused"):
            h = np.array([sum(o.outcome == name for o in with_p[e].outcomes) if e in with_p else 0
                          for e, _ in days], dtype=float)
            ax.bar(x, h, bottom=bottom, color=_COLOURS[name], label=_LABELS[name], width=0.8)
            bottom += h
        if without:
            off = [sum(o.outcome == "refused" for o in without[e].outcomes) if e in without else np.nan
                   for e, _ in days]
            ax.plot(x, off, "k_", markersize=14, mew=2, label="refused without P")
        ax.set_ylim(0, max(1.0, float(bottom.max())) * 1.3)  # room for the legend above the bars
        ax.set_xticks(x, labels, rotation=90 if len(days) > 14 else 0, fontsize=8)
        ax.set_ylabel("statements")
        ax.set_title(f"epsilon = {eps:g} per {'day' if result.epoch_hours == 24 else 'epoch'}: outcomes with P")
        ax.legend(fontsize=7, ncol=5, loc="upper left")
        # Burn along the epoch: each epoch thin, the median bold; without P dashed.
        bx = fig.add_subplot(grid[row, 2])
        hours = np.linspace(0, result.epoch_hours, 97)
        for flag, style in ((True, "-"), (False, "--")):
            curves = []
            for r in result.runs:
                if r.epsilon != eps or r.with_p != flag or not r.outcomes:
                    continue
                t = np.array([o.offset_s / 3600 for o in r.outcomes])
                s = np.array([o.spent for o in r.outcomes])
                curve = np.interp(hours, t, s, left=s[0], right=s[-1])
                curves.append(curve)
                if flag:
                    bx.plot(hours, curve, color="tab:purple", alpha=0.15, lw=0.8)
            if curves:
                bx.plot(hours, np.median(np.array(curves), axis=0), style, color="tab:purple", lw=2,
                        label="median, with P" if flag else "median, P off")
        bx.set_ylim(0, 1.02)
        bx.set_xlim(0, result.epoch_hours)
        bx.set_xlabel("hours into the epoch")
        bx.set_ylabel("share of query budget spent")
        bx.set_title(f"budget burn, epsilon = {eps:g}")
        bx.legend(fontsize=7, loc="lower right")
    # Error distributions per kind: relative error of answered statements, with P (and P off, hatched).
    ex = fig.add_subplot(grid[len(eps_list), :2])
    data, pos, colours, ticks = [], [], [], []
    k = 0.0
    for name, test in KINDS.items():
        for j, eps in enumerate(eps_list):
            for flag in (True, False):
                rel = [max(o.rel_error, 1e-5) for r in result.runs if r.epsilon == eps and r.with_p == flag
                       for o in r.outcomes if o.kind is not None and test(o.kind) and o.rel_error is not None]
                if rel:
                    data.append(rel)
                    pos.append(k)
                    colours.append((f"C{j}", flag))
                k += 0.45
        ticks.append((k - 0.45 * len(eps_list) - 0.2, name))
        k += 0.8
    if data:
        parts = ex.boxplot(data, positions=pos, widths=0.38, showfliers=False, patch_artist=True)
        for patch, (c, flag) in zip(parts["boxes"], colours, strict=True):
            patch.set_facecolor(c)
            patch.set_alpha(0.8 if flag else 0.3)
            if not flag:
                patch.set_hatch("//")
    ex.set_yscale("log")
    ex.axhline(0.05, color="k", lw=0.6, ls=":")
    ex.axhline(0.10, color="k", lw=0.6, ls="--")
    ex.set_xticks([t for t, _ in ticks], [n for _, n in ticks])
    ex.set_ylabel("relative error (answered statements)")
    handles = [matplotlib.patches.Patch(color=f"C{j}", label=f"epsilon {e:g}") for j, e in enumerate(eps_list)]
    handles.append(matplotlib.patches.Patch(facecolor="white", edgecolor="k", hatch="//", label="P off"))
    ex.legend(handles=handles, fontsize=7, loc="upper left")
    ex.set_title("error by statement kind (boxes: quartiles; dotted 5%, dashed 10%)")
    tx = fig.add_subplot(grid[len(eps_list), 2])
    tx.axis("off")
    text = "\n\n".join(textwrap.fill(s, 58) for s in summary_lines(result))
    tx.text(0, 1, text, va="top", ha="left", fontsize=8, family="monospace")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    os.chmod(path, 0o600)


def write_report(result: WhatIfResult, directory: str | Path) -> dict[str, Path]:
    """whatif.png and whatif.html (the PNG inlined, the summary and the per-epoch table) in ``directory``."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    os.chmod(out, 0o700)
    png = out / "whatif.png"
    plot(result, png)
    tot = totals(result)
    rows = "".join(
        f"<tr><td>{t['epsilon']:g}</td><td>{'on' if t['with_p'] else 'off'}</td><td>{t['statements']}</td>"
        f"<td>{t['fresh']}</td><td>{t['from_p']}</td><td>{t['free']}</td><td>{t['refused']}</td>"
        f"<td>{_pct(t['median_rel_error'])}</td><td>{_pct(t['within_5pct'])}</td><td>{_pct(t['within_10pct'])}</td>"
        f"<td>{t['days_with_refusals']}</td></tr>" for t in tot)
    page = f"""<!doctype html><html><head><meta charset="utf-8"><title>LAPRAS what-if</title>
<style>body{{font-family:sans-serif;max-width:1300px;margin:1em auto}}td,th{{padding:2px 8px;text-align:right}}
pre{{font-size:12px}}</style></head><body>
<h1>What-if replay</h1><p><b>Operator only</b>: these figures are computed against exact answers.</p>
<ul>{''.join(f'<li>{html.escape(s)}</li>' for s in summary_lines(result))}</ul>
<table><tr><th>epsilon</th><th>P</th><th>statements</th><th>fresh</th><th>from P</th><th>free</th><th>refused</th>
<th>median rel. error</th><th>&lt;5%</th><th>&lt;10%</th><th>epochs with refusals</th></tr>{rows}</table>
<img alt="what-if report" style="width:100%" src="data:image/png;base64,{base64.b64encode(png.read_bytes()).decode()}">
<h2>Per epoch</h2><pre>{html.escape(format_table(result))}</pre></body></html>
"""
    page_path = out / "whatif.html"
    _private_write(page_path, page.encode())
    return {"png": png, "html": page_path}


def _pct(x: Any) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"
