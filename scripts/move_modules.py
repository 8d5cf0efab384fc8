"""Move Python modules and rewrite every import of them across the repository (issue 28's parser split).

    python scripts/move_modules.py --move      # git mv the modules of MOVES, then rewrite (once)
    python scripts/move_modules.py             # rewrite only: idempotent, safe to re-run after a merge

The rewrite reads each file's imports with ``ast`` and edits only those lines:
- ``from old.mod import x`` / ``import old.mod [as y]`` / ``from old import mod`` -> the new path;
- a relative import is resolved against the file's package; if it names a module that no longer exists,
  it is resolved against the file's old package (a file moved here: merged edits from before the move)
  or mapped through MOVES, then written relative again when the target is in the same top-level package
  (absolute otherwise, e.g. ``from pgcore import errors as E``);
- dotted (``parser.sql.answers_sql``) and path (``parser/sql.py``) references in comments, docstrings
  and Markdown are rewritten too.
A renamed module imported by ``from pkg import name`` keeps its local name with ``as``; an import
line marked ``move_modules: keep`` is left alone. Run ``ruff check
--select I --fix`` afterwards to re-sort the edited import blocks.
"""

from __future__ import annotations

import argparse
import ast
import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ROOTS = ("proxy", "parser", "pgcore", "lapras", "predictor", "tests", "benchmarks", "scripts")
TEXT = ("docs", "README.md", "parser/README.md", "benchmarks/README.md")

MOVES = {
    # moved after the first move (merges of other work)
    "parser.splits": "parser.bind.splits",
    "proxy.ops.config": "proxy.config",
    "proxy.ops.keys": "proxy.config.keys",
    "lapras.strategy.cache": "lapras.strategy_cache",
    # ops/ services lower layers use, moved below them
    "proxy.ops.embedded": "proxy.upstream.embedded",
    "proxy.ops.demo_data": "proxy.upstream.demo_data",
    "proxy.ops.events_data": "proxy.upstream.events_data",
    "proxy.ops.shop_data": "proxy.upstream.shop_data",
    "proxy.ops.value_lists": "proxy.upstream.value_lists",
    "proxy.ops.reload": "proxy.config.reload",
    "proxy.ops.shared_settings": "proxy.config.stored",
    "proxy.ops.version": "proxy.observability.version",
    "parser.sqlscan": "pgcore.sqlscan",
    # the ground floor: PostgreSQL basics every package imports, without loading the front end
    "parser.sqlstate": "pgcore.sqlstate",
    "parser.pgtypes": "pgcore.pgtypes",
    "parser.identifiers": "pgcore.identifiers",
    "parser.arrays": "pgcore.arrays",
    "parser.errors": "pgcore.errors",
    # the forms every pass, the pushed-down SQL and lapras share
    "parser.schema": "parser.model.schema",
    "parser.public": "parser.model.public",
    "parser.linear": "parser.model.linear",
    "parser.predicate": "parser.model.predicate",
    "parser.limits": "parser.model.limits",
    # the front end, by pass
    "parser.syntax": "parser.syntax.parse",
    "parser.cache": "parser.syntax.cache",
    "parser.template": "parser.analysis.template",
    "parser.condition": "parser.analysis.condition",
    "parser.values": "parser.semantics.values",
    "parser.functions": "parser.semantics.functions",
    "parser.temporal": "parser.semantics.datetimes",
    "parser.collation": "parser.semantics.collation",
    "parser.regex": "parser.semantics.regex",
    "parser.tochar": "parser.semantics.tochar",
    "parser.bind": "parser.bind.binder",
    "parser.distinct": "parser.bind.distinct",
    "parser.partition": "parser.bind.partition",
    "parser.plan": "parser.plan.queryplan",
    "parser.postprocess": "parser.plan.postprocess",
    "parser.quantile": "parser.plan.quantile",
    "parser.series": "parser.plan.series",
    # the SQL pushed down upstream (lapras reads with it)
    "parser.sql": "parser.pushdown.sql",
    "parser.bounding": "parser.pushdown.bounding",
    "parser.histogram": "parser.pushdown.histogram",
    "parser.rowfilter": "parser.pushdown.rowfilter",
}
PACKAGE_DOCS = {
    "pgcore": "PostgreSQL basics every package shares: SQLSTATEs and SqlError, type oids, names, arrays, "
              "Refusal.",
    "parser.model": "The forms every pass, the pushed-down SQL and lapras share: the declared catalog, cell "
                    "sets, LinearQuery, work limits.",
    "parser.syntax": "SQL text -> sqlglot tree, and the digest-keyed caches of parsed statements.",
    "parser.semantics": "PostgreSQL's value semantics the scalar evaluator applies: values, functions, "
                        "dates and times, collation, regular expressions, to_char.",
    "parser.bind": "The binder: the WHERE form and parameters -> cell sets -> LinearQuery per group and "
                   "aggregate; COUNT(DISTINCT) and partition selection.",
    "parser.plan": "QueryPlan: the queries, the result columns, and rows from the noisy answers "
                   "(post-processing, order statistics, Superset's series limit).",
    "parser.pushdown": "The exact SQL pushed down upstream: answers, marginals, per-unit bounding, row "
                       "filters.",
}
OLD_OF_NEW = {new: old for old, new in MOVES.items()}


def path_of(module: str, package: bool = False) -> Path:
    return REPO.joinpath(*module.split(".")).joinpath("__init__.py") if package else \
        REPO.joinpath(*module.split(".")).with_suffix(".py")


def module_exists(module: str) -> bool:
    return path_of(module).exists() or path_of(module, package=True).exists()


def module_of(path: Path) -> tuple[str, str]:
    """The file's module name and the package its relative imports start from."""
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
        return ".".join(parts), ".".join(parts)
    return ".".join(parts), ".".join(parts[:-1])


def resolve(package: str, level: int, module: str | None) -> str:
    base = package.split(".")
    base = base[:len(base) - level + 1]
    return ".".join(base + ([module] if module else []))


def relativize(package: str, target: str) -> tuple[int, str]:
    """(level, module) of ``target`` imported relatively from ``package`` (same top-level package)."""
    p, t = package.split("."), target.split(".")
    common = 0
    while common < min(len(p), len(t)) and p[common] == t[common]:
        common += 1
    return len(p) - common + 1, ".".join(t[common:])


def new_name(module: str) -> str:
    return MOVES.get(module, module)


_TOP_NAMES: dict[str, set[str]] = {}


def top_names(module: str) -> set[str]:
    """Names a module defines or imports at its top level (a ``from module import name`` may take them)."""
    if module not in _TOP_NAMES:
        path = path_of(module, package=True) if path_of(module, package=True).exists() else path_of(module)
        names: set[str] = set()
        body = list(ast.parse(path.read_text()).body)
        while body:
            node = body.pop()
            if isinstance(node, ast.If | ast.Try):
                body += node.body + node.orelse + getattr(node, "finalbody", [])
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Import | ast.ImportFrom):
                names.update((a.asname or a.name).split(".")[0] for a in node.names)
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                for t in node.targets if isinstance(node, ast.Assign) else [node.target]:
                    names.update(n.id for n in ast.walk(t) if isinstance(n, ast.Name))
        _TOP_NAMES[module] = names
    return _TOP_NAMES[module]


def place(target: str, aliases: list[ast.alias]) -> list[tuple[str, ast.alias, str]] | None:
    """Where each imported name lives now: (parent module, alias, name); None when ``target`` does not
    give them (a stale relative import, or not one of our modules)."""
    moved_target = MOVES.get(target, target)
    if not module_exists(moved_target):
        return None
    out = []
    for a in aliases:
        full = f"{target}.{a.name}"
        if full in MOVES:
            parent, _, name = MOVES[full].rpartition(".")
            out.append((parent, a, name))
        elif a.name == "*" or module_exists(f"{moved_target}.{a.name}") or a.name in top_names(moved_target):
            out.append((moved_target, a, a.name))
        else:
            return None
    return out


def _alias(a: ast.alias, name: str) -> str:
    asname = a.asname or (a.name if name != a.name else None)
    return name + (f" as {asname}" if asname and asname != name else "")


def rewrite_import(node: ast.ImportFrom | ast.Import, module: str, package: str) -> list[str] | None:
    """The import's new statements (None: unchanged)."""
    if isinstance(node, ast.Import):
        if not any(a.name in MOVES for a in node.names):
            return None
        return [f"import {new_name(a.name)}" + (f" as {a.asname}" if a.asname else "") for a in node.names]
    if node.level:
        here = resolve(package, node.level, node.module)
        candidates = [here]
        old_module = OLD_OF_NEW.get(module)
        if old_module is not None:  # a moved file whose imports still speak from its old place
            old_pkg = old_module if path_of(module, package=True).exists() else old_module.rpartition(".")[0]
            candidates.append(resolve(old_pkg, node.level, node.module))
    else:
        here = node.module or ""
        candidates = [here]
    placed = None
    for c in candidates:
        placed = place(c, node.names)
        if placed is not None:
            break
    if placed is None or all(parent == here and name == a.name for parent, a, name in placed):
        return None
    top = module.split(".")[0]
    groups: dict[str, list[str]] = {}
    for parent, a, name in placed:
        groups.setdefault(parent, []).append(_alias(a, name))
    out = []
    for parent, names in groups.items():
        if node.level and parent.split(".")[0] == top:
            lv, mod = relativize(package, parent)
            out.append(f"from {'.' * lv}{mod} import {', '.join(names)}")
        else:
            out.append(f"from {parent} import {', '.join(names)}")
    return out


def _dotted_patterns() -> list[tuple[re.Pattern[str], str]]:
    pats = []
    for old, new in sorted(MOVES.items(), key=lambda kv: -len(kv[0])):
        children = sorted({n.rpartition(".")[2] for n in MOVES.values() if n.rpartition(".")[0] == old})
        guard = rf"(?!\.(?:{'|'.join(children)})\b)" if children else ""  # old module, now a package
        pats.append((re.compile(rf"(?<![\w.]){re.escape(old)}\b{guard}(?!\s*=)"), new))
        oldp, newp = old.replace(".", "/"), new.replace(".", "/")
        pats.append((re.compile(rf"(?<![\w./]){re.escape(oldp)}\.py\b"), newp + ".py"))
    return pats


PATTERNS = _dotted_patterns()


def rewrite_text(text: str) -> str:
    """Dotted and path references rewritten, import statements left alone (``rewrite_import``'s job)."""
    lines = text.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if not line.lstrip().startswith(("from ", "import ")):
            for pat, new in PATTERNS:
                line = pat.sub(new, line)
            lines[i] = line
    return "".join(lines)


def rewrite_file(path: Path) -> bool:
    source = path.read_text()
    module, package = module_of(path)
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False
    lines = source.splitlines(keepends=True)
    edits: list[tuple[int, int, list[str]]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            if "move_modules: keep" in lines[node.lineno - 1]:  # an import of the old layout on purpose
                continue
            new = rewrite_import(node, module, package)
            if new is not None:
                edits.append((node.lineno, node.end_lineno or node.lineno, new))
    for start, end, new in sorted(edits, reverse=True):
        indent = re.match(r"\s*", lines[start - 1]).group(0)  # type: ignore[union-attr]
        comments = [line.split("#", 1)[1].strip() for line in lines[start - 1:end] if "#" in line]
        comment = "  # " + "; ".join(comments) if comments else ""
        lines[start - 1:end] = [indent + s + (comment if i == 0 else "") + "\n" for i, s in enumerate(new)]
    out = rewrite_text("".join(lines))
    if out != source:
        path.write_text(out)
        return True
    return False


def files() -> list[Path]:
    out = []
    for root in ROOTS:
        base = REPO / root
        if base.exists():
            out += [p for p in base.rglob("*.py") if "__pycache__" not in p.parts]
    return sorted(out)


def text_files() -> list[Path]:
    out: list[Path] = []
    for t in TEXT:
        p = REPO / t
        out += sorted(p.rglob("*.md")) if p.is_dir() else [p] if p.exists() else []
    return out


def move() -> None:
    for old, new in MOVES.items():
        src, dst = path_of(old), path_of(new)
        if not src.exists():
            continue
        dst.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "-C", str(REPO), "mv", str(src), str(dst)], check=True)
    for pkg, doc in PACKAGE_DOCS.items():
        init = path_of(pkg, package=True)
        if not init.exists():
            init.write_text(f'"""{doc}"""\n')
            subprocess.run(["git", "-C", str(REPO), "add", str(init)], check=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--move", action="store_true", help="git mv the modules first")
    args = ap.parse_args()
    if args.move:
        move()
    changed = [p for p in files() if p.resolve() != Path(__file__).resolve() and rewrite_file(p)]
    for p in text_files():
        t = p.read_text()
        n = rewrite_text(t)
        if n != t:
            p.write_text(n)
            changed.append(p)
    print(f"{len(changed)} files rewritten")


if __name__ == "__main__":
    main()
