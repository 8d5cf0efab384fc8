"""The architecture's checks that a grep can make (issue 15): parser modules stay <= 400 lines, random
draws happen only in the mechanisms package (and in the few places that draw no privacy noise, named
below with the reason), and docs/architecture.md names every subpackage."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("proxy", "parser", "pgcore", "lapras", "predictor")

# Draws outside lapras/mechanisms that are not privacy noise.
NOT_NOISE = {
    "lapras/regression/sketches.py": "sketch matrices, from the mechanisms' secret stream (its docstring)",
    "lapras/strategy/optimize.py": "starting points of the strategy search (public, data-independent)",
    "proxy/ops/demo_data.py": "the synthetic demo rows (a fixed seed)",
    "proxy/ops/shop_data.py": "the synthetic shop demo rows (a fixed seed)",
}
DRAW = re.compile(r"\.(normal|standard_normal|laplace|integers|choice|uniform|gamma|random|poisson|signs|subset)\(")


def _modules(package: str) -> list[Path]:
    return sorted(p for p in (REPO / package).rglob("*.py") if "__pycache__" not in p.parts)


def test_no_parser_module_over_400_lines() -> None:
    long = {str(p.relative_to(REPO)): n for p in _modules("parser")
            if (n := len(p.read_text().splitlines())) > 400}
    assert not long, long


def test_random_draws_only_in_the_mechanisms_package() -> None:
    found = []
    for package in PACKAGES:
        for p in _modules(package):
            rel = str(p.relative_to(REPO))
            if rel.startswith("lapras/mechanisms/") or rel in NOT_NOISE:
                continue
            found += [f"{rel}:{i}: {line.strip()}" for i, line in enumerate(p.read_text().splitlines(), 1)
                      if DRAW.search(line) and not line.lstrip().startswith("#")]
    assert not found, "\n".join(found)


def test_architecture_names_every_subpackage() -> None:
    text = (REPO / "docs" / "architecture.md").read_text()
    table = text.split("## Packages", 1)[1].split("\n## ", 1)[0]
    subpackages = sorted(str(p.parent.relative_to(REPO)) for package in PACKAGES
                         for p in (REPO / package).rglob("__init__.py") if "__pycache__" not in p.parts)
    missing = [s for s in subpackages if f"`{s}/`" not in table]
    assert not missing, missing
