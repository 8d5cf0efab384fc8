"""The architecture's checks that a grep can make (issue 15): parser modules stay <= 400 lines, random
draws happen only in the mechanisms package (and in the few places that draw no privacy noise, named
below with the reason), and docs/architecture.md names every subpackage; and the import checks (issue 28):
layer order, no circles, function-local imports only where they pay, no two parser modules of one name."""

from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("proxy", "parser", "pgcore", "lapras", "predictor")

# Draws outside lapras/mechanisms that are not privacy noise.
NOT_NOISE = {
    "lapras/regression/sketches.py": "sketch matrices, from the mechanisms' secret stream (its docstring)",
    "lapras/strategy/optimize.py": "starting points of the strategy search (public, data-independent)",
    "proxy/upstream/demo_data.py": "the synthetic demo rows (a fixed seed)",
    "proxy/upstream/shop_data.py": "the synthetic shop demo rows (a fixed seed)",
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


# --- imports (issue 28): read with ast, module-level and function-local alike ---------------------------

LAYERS = {"pgcore": 0, "parser": 1, "lapras": 2, "predictor": 2, "proxy": 3, "benchmarks": 4}
"""benchmarks -> proxy -> lapras, predictor -> parser -> pgcore: a package imports only lower layers (and
itself); lapras and predictor do not import each other; nothing imports tests or benchmarks."""
PRODUCT = ("pgcore", "parser", "lapras", "predictor", "proxy")
PARSER_FLOORS = ("parser.semantics", "parser.coltypes", "parser.model", "parser.pushdown")
"""Inside parser/, floors below the front end, each importing only pgcore and the floors before it: value
semantics, column types, the shared forms (catalog, cell sets, LinearQuery), the SQL pushed down."""


@dataclass(frozen=True)
class Import:
    source: str  # the importing module
    target: str  # the imported module of ours (a package's __init__ when a name comes from it)
    path: str
    line: int
    local: bool  # inside a function
    commented: bool  # a comment on its line or the line above says why


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _all_modules() -> dict[str, Path]:
    return {_module_name(p): p for root in (*PRODUCT, "benchmarks", "tests") for p in _modules(root)}


def _imports(path: Path, modules: dict[str, Path]) -> list[Import]:
    """Every import in the file of a module of ours (relative ones resolved), and every function-local
    import of anything (third-party included: those need their comment too)."""
    source = path.read_text()
    lines = source.splitlines()
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    rel = str(path.relative_to(REPO))
    out: list[Import] = []

    def ours(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    def visit(node: ast.AST, local: bool) -> None:
        # imports are statements: walk the statement lists only (bodies, else and finally blocks, handlers)
        children = [c for f in ("body", "orelse", "finalbody", "handlers", "cases")
                    for c in getattr(node, f, None) or () if isinstance(c, ast.AST)]
        for child in children:
            if isinstance(child, ast.Import | ast.ImportFrom):
                if isinstance(child, ast.Import):
                    names = [a.name for a in child.names]
                elif child.level:
                    base = package.split(".")[:len(package.split(".")) - child.level + 1]
                    prefix = ".".join(base + ([child.module] if child.module else []))
                    names = [f"{prefix}.{a.name}" for a in child.names]
                else:
                    names = [f"{child.module}.{a.name}" for a in child.names]
                near = lines[child.lineno - 1] + (lines[child.lineno - 2] if child.lineno > 1 else "")
                for name in names:
                    target = ours(name)
                    if (target or local) and target != module:
                        out.append(Import(module, target or name, rel, child.lineno, local, "#" in near))
            visit(child, local or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef))

    visit(ast.parse(source), False)
    return out


@functools.cache
def _graph() -> tuple[dict[str, Path], list[Import]]:
    modules = _all_modules()
    return modules, [i for m, p in modules.items() for i in _imports(p, modules)]


def _top(module: str) -> str:
    return module.split(".")[0]


PROXY_LAYERS = {"commands": 7, "ops": 6, "replay": 5, "devcluster": 5, "server": 4, "conversation": 3,
                "statements": 2, "dp": 1, "catalog": 1, "upstream": 0, "observability": 0, "protocol": 0, "config": -1}
"""proxy/'s layers, top to bottom (a subpackage imports only lower ones): the commands (the CLI and each
subcommand's module) above all; ops (config, embedded PostgreSQL, demo data, reload); the replay and
dev-cluster tools; server; conversation; statements; the DP service and the catalog; protocol and
observability and the upstream (embedded PostgreSQL, demo data, value lists); config (config.toml's keys,
loader, reload diff and the settings stored with the ledger) the ground floor."""
COMMANDS = ("proxy.ops.cli", "proxy.ops.app", "proxy.ops.supervisor", "proxy.devcluster.cli", "proxy.replay.cli",
            "proxy.replay.whatif.cli")
LAZY_COMMANDS = {
    # The command line loads each command's implementation when that command runs: `serve` pulls in lapras,
    # numpy, scipy, the DP service and the server (about 1.5 s more than `check-config` or `hash-password`
    # need, measured importing them), and every CLI start imports each command module's add_parser.
    "proxy/ops/cli.py", "proxy/ops/app.py", "proxy/devcluster/cli.py", "proxy/replay/whatif/cli.py",
}

UPWARD_ALLOWED: dict[str, str] = {}  # none left: an entry names the imported module and why
CIRCLES_ALLOWED: set[frozenset[str]] = {
}
LOCAL_ALLOWED_FILES = {
}
LOCAL_ALLOWED_DIRS: tuple[str, ...] = ()


def _proxy_layer(module: str) -> int:
    if module.startswith(COMMANDS):
        return PROXY_LAYERS["commands"]
    return PROXY_LAYERS.get(module.split(".")[1] if "." in module else "", -1)


def test_layer_order() -> None:
    """No import runs up a layer: each package imports only the layers below it (and itself), and inside
    proxy/ each subpackage only the subpackages below it."""
    modules, imports = _graph()
    up = []
    for i in imports:
        s, t = _top(i.source), _top(i.target)
        if s == "tests" or i.target not in modules:
            continue
        if s == t == "proxy":
            sub = i.source.split(".")[:2] != i.target.split(".")[:2]
            bad = sub and _proxy_layer(i.target) > _proxy_layer(i.source)
        elif s == "benchmarks" and i.target.startswith("tests.fixtures."):
            bad = False  # a benchmark may reuse the tests' shared fixtures (corpus schemas, generators)
        else:
            bad = s != t and (t in ("tests", "benchmarks") or LAYERS[t] >= LAYERS[s])
        if bad and i.target not in UPWARD_ALLOWED:
            up.append(f"{i.path}:{i.line}: {i.source} -> {i.target}")
    assert not up, "\n".join(up)


def test_parser_floors() -> None:
    """Inside parser/: the floors below the front end import only pgcore and the floors before them, and
    outside parser/ the pushed-down SQL is lapras's (proxy and predictor do not import it)."""
    _, imports = _graph()
    bad = []
    for i in imports:
        floor = next((n for n, f in enumerate(PARSER_FLOORS) if i.source.startswith(f + ".") or i.source == f), None)
        if floor is not None and _top(i.target) == "parser":
            allowed = PARSER_FLOORS[:floor + 1]
            if not any(i.target == f or i.target.startswith(f + ".") for f in allowed):
                bad.append(f"{i.path}:{i.line}: {i.source} -> {i.target}")
        if i.target.startswith("parser.pushdown") and _top(i.source) in ("proxy", "predictor"):
            bad.append(f"{i.path}:{i.line}: {i.source} -> {i.target}")
    assert not bad, "\n".join(bad)


def _circles(edges: dict[str, set[str]]) -> list[frozenset[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[frozenset[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = set()
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.add(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(frozenset(comp))
    return out


def test_no_import_circles() -> None:
    """No circle between modules, counting module-level, function-local and TYPE_CHECKING imports alike
    (a function-local import hides a circle, it does not remove it)."""
    modules, imports = _graph()
    edges: dict[str, set[str]] = {}
    for i in imports:
        if i.target in modules:
            edges.setdefault(i.source, set()).add(i.target)
    circles = [sorted(c) for c in _circles(edges) if c not in CIRCLES_ALLOWED]
    assert not circles, circles


def test_function_local_imports_only_for_heavy_optional_dependencies() -> None:
    """In the product packages a function-local import is of a heavy third-party module, loaded only by the
    path that needs it, with a comment saying why; never of our own modules, but in the command modules
    (``LAZY_COMMANDS``, the reason given there once)."""
    _, imports = _graph()
    bad = []
    for i in imports:
        if not i.local or _top(i.source) not in PRODUCT or i.path in LOCAL_ALLOWED_FILES \
                or i.path.startswith(LOCAL_ALLOWED_DIRS):
            continue
        if i.path in LAZY_COMMANDS and _top(i.target) in PRODUCT:
            continue
        if _top(i.target) in PRODUCT or not i.commented:
            bad.append(f"{i.path}:{i.line}: {i.target}" + ("" if i.commented else " (no comment)"))
    assert not bad, f"{len(bad)}\n" + "\n".join(bad)


def test_no_two_modules_of_one_name() -> None:
    """Inside pgcore/ and parser/ a module's file name says which one it is."""
    seen: dict[str, list[str]] = {}
    for package in ("pgcore", "parser"):
        for p in _modules(package):
            if p.name != "__init__.py":
                seen.setdefault(p.stem, []).append(str(p.relative_to(REPO)))
    assert not {k: v for k, v in seen.items() if len(v) > 1}
