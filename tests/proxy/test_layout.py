"""proxy/ is split by layer: no flat modules but __init__.py, and docs/architecture.md names each subpackage."""

from __future__ import annotations

from pathlib import Path

PROXY = Path(__file__).resolve().parents[2] / "proxy"


def test_no_flat_modules_in_proxy() -> None:
    assert sorted(p.name for p in PROXY.glob("*.py")) == ["__init__.py"]


def test_architecture_lists_every_subpackage_once() -> None:
    text = (PROXY.parent / "docs" / "architecture.md").read_text()
    section = text.split("\n## proxy/\n", 1)[1].split("\n## ", 1)[0]
    listed = [line.split("`")[1] for line in section.splitlines() if line.startswith("- `proxy/")]
    packages = sorted(f"proxy/{p.parent.name}/" for p in PROXY.glob("*/__init__.py"))
    assert sorted(listed) == packages
