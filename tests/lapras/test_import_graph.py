"""The engine package's imports, read from its source (issue 28): no import circle among lapras' modules
(type-only imports included), and a function-local import only for a heavy optional dependency, with a
comment saying why on the import or just above it."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LAPRAS = ROOT / "lapras"
# Imported inside a function on purpose: optional, heavy or native dependencies (and a module that imports one).
LAZY_OK = {"psycopg", "lapras.bounded", "lapras.ledger.postgres", "opendp.prelude", "randomgen", "cvxpy"}


def _module(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> list[tuple[str, ast.stmt, bool]]:
    """(module imported, statement, at module level or under TYPE_CHECKING) of one file."""
    tree = ast.parse(path.read_text())
    mod = _module(path)
    package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
    out: list[tuple[str, ast.stmt, bool]] = []

    def visit(node: ast.AST, top: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = top and not isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
            if isinstance(child, ast.Import):
                out.extend((a.name, child, top) for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    anchor = package.split(".")[: len(package.split(".")) - child.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                out.append((base, child, top))
                out.extend((f"{base}.{a.name}", child, top) for a in child.names)  # a submodule imported by name
            visit(child, inner)

    visit(tree, True)
    return out


def _graph() -> dict[str, set[str]]:
    files = {_module(p): p for p in LAPRAS.rglob("*.py") if "__pycache__" not in p.parts}
    graph: dict[str, set[str]] = {m: set() for m in files}
    for mod, path in files.items():
        for name, _, _ in _imports(path):
            if name in files and name != mod and not mod.startswith(name + "."):
                # (A module's own packages are being initialised when it runs: importing a sibling
                # through them is no circle.)
                graph[mod].add(name)
                parts = name.split(".")
                # Importing a.b.c runs a/__init__ and a/b/__init__ first.
                graph[mod].update(p for i in range(1, len(parts)) if (p := ".".join(parts[:i])) in files and p != mod
                                  and not mod.startswith(p + "."))
    return graph


def test_no_import_circle_in_lapras() -> None:
    graph = _graph()
    state: dict[str, int] = {}
    circles: list[list[str]] = []

    def walk(node: str, stack: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                circles.append([*stack[stack.index(nxt):], nxt])
            elif nxt not in state:
                walk(nxt, [*stack, nxt])
        state[node] = 2

    for start in sorted(graph):
        if start not in state:
            walk(start, [start])
    assert not circles, circles


def test_function_local_imports_are_optional_dependencies_with_a_reason() -> None:
    bad = []
    for path in sorted(LAPRAS.rglob("*.py")):
        lines = path.read_text().splitlines()
        for name, stmt, top in _imports(path):
            if top or isinstance(stmt, ast.ImportFrom) and name != (stmt.module or ""):
                continue
            where = f"{path.relative_to(ROOT)}:{stmt.lineno}"
            if name not in LAZY_OK:
                bad.append(f"{where}: {name} imported inside a function")
                continue
            # The reason: a comment on the import or on one of the three lines above it.
            if not any("#" in line for line in lines[max(0, stmt.lineno - 4):stmt.lineno]):
                bad.append(f"{where}: {name} imported lazily without a comment saying why")
    assert not bad, "\n".join(bad)
