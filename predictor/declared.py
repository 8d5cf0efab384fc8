"""DBA-declared templates: SQL with named parameters expanded into concrete queries for P.

config.toml::

    [[predictor.templates]]
    sql = "SELECT COUNT(*) FROM adult WHERE age BETWEEN :lo AND :hi"
    params = { lo = { range = [20, 80, 10] }, hi = { expr = "lo + 9" } }

    [[predictor.templates]]
    sql = "SELECT sex, COUNT(*) FROM adult WHERE race = :r GROUP BY sex"
    params = { r = { values = [0, 1, 2, 3, 4] } }

Each parameter is one of:

- ``values = [...]``: an explicit list (numbers or strings);
- ``range = [start, stop, step]``: ``start, start+step, ...`` up to and including ``stop`` (step defaults
  to 1; a negative step counts down);
- ``expr = "..."``: arithmetic on the other parameters (``+ - * / // %``, parentheses, numbers, names),
  evaluated per combination; ``value = x``: a constant.

The expansion is the cartesian product of the list/range parameters, with ``expr`` parameters computed for
each combination. ``:name`` placeholders are replaced by SQL literals (strings quoted, ``'`` doubled); a
``:name`` inside a string literal or a ``::type`` cast is left alone. ``max_queries`` (default 10,000) in
a template bounds its expansion; a larger product is an error rather than a silent truncation.
"""

from __future__ import annotations

import ast
import itertools
import operator
import re
from collections.abc import Mapping, Sequence
from typing import Any


class TemplateError(ValueError):
    """A declared template is malformed (unknown parameter, bad range, expansion too large, ...)."""


_PLACEHOLDER = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")
_OPS: dict[type, Any] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}


def _eval(expr: str, env: Mapping[str, Any]) -> Any:
    """Evaluate a small arithmetic expression without eval()."""
    try:
        tree = ast.parse(expr, mode="eval")
    except SyntaxError as exc:
        raise TemplateError(f"bad expression {expr!r}: {exc.msg}") from None

    def ev(node: ast.AST) -> Any:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, str)):
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in env:
                raise TemplateError(f"expression {expr!r} uses unknown parameter {node.id!r}")
            return env[node.id]
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](ev(node.operand))
        raise TemplateError(f"unsupported syntax in expression {expr!r}")

    value = ev(tree)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return value


def _range(spec: Sequence[Any]) -> list[Any]:
    if not 2 <= len(spec) <= 3:
        raise TemplateError(f"range needs [start, stop] or [start, stop, step], got {list(spec)}")
    start, stop = spec[0], spec[1]
    step = spec[2] if len(spec) == 3 else 1
    if step == 0:
        raise TemplateError("range step must not be 0")
    out: list[Any] = []
    v = start
    while (step > 0 and v <= stop) or (step < 0 and v >= stop):
        out.append(v)
        v = v + step
        if len(out) > 1_000_000:
            raise TemplateError("range too long")
    return out


def _literal(value: Any) -> str:
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, (int, float)):
        return repr(value)
    if value is None:
        return "NULL"
    return "'" + str(value).replace("'", "''") + "'"


def _substitute(sql: str, env: Mapping[str, Any]) -> str:
    out: list[str] = []
    i = 0
    for m in re.finditer(r"'(?:[^']|'')*'|" + _PLACEHOLDER.pattern, sql):
        out.append(sql[i : m.start()])
        token = m.group(0)
        if token.startswith("'"):
            out.append(token)
        else:
            name = m.group(1)
            if name not in env:
                raise TemplateError(f"placeholder :{name} has no parameter")
            out.append(_literal(env[name]))
        i = m.end()
    out.append(sql[i:])
    return "".join(out)


def expand_template(spec: Mapping[str, Any]) -> list[str]:
    sql = spec.get("sql")
    if not isinstance(sql, str) or not sql.strip():
        raise TemplateError("template needs a non-empty sql")
    params = spec.get("params", {}) or {}
    if not isinstance(params, Mapping):
        raise TemplateError("params must be a table")
    limit = int(spec.get("max_queries", 10_000))
    lists: dict[str, list[Any]] = {}
    exprs: dict[str, str] = {}
    for name, p in params.items():
        if not isinstance(p, Mapping):
            lists[name] = [p]
        elif "values" in p:
            lists[name] = list(p["values"])
        elif "range" in p:
            lists[name] = _range(p["range"])
        elif "expr" in p:
            exprs[name] = str(p["expr"])
        elif "value" in p:
            lists[name] = [p["value"]]
        else:
            raise TemplateError(f"parameter {name!r} needs values, range, expr or value")
    total = 1
    for vals in lists.values():
        total *= len(vals)
    if total > limit:
        raise TemplateError(f"template expands to {total} queries (max_queries = {limit})")
    names = list(lists)
    out: list[str] = []
    for combo in itertools.product(*(lists[n] for n in names)):
        env: dict[str, Any] = dict(zip(names, combo, strict=True))
        pending = dict(exprs)
        # expr parameters may refer to each other: evaluate in dependency order.
        while pending:
            progress = False
            for name, e in list(pending.items()):
                deps = {node.id for node in ast.walk(ast.parse(e, mode="eval")) if isinstance(node, ast.Name)}
                if deps <= env.keys():
                    env[name] = _eval(e, env)
                    del pending[name]
                    progress = True
            if not progress:
                raise TemplateError(f"cyclic or unknown references in {sorted(pending)}")
        out.append(_substitute(sql, env))
    return out


def expand_templates(specs: Sequence[Mapping[str, Any]]) -> list[str]:
    """Expand every declared template; the result keeps declaration order and drops exact duplicates."""
    seen: dict[str, None] = {}
    for spec in specs:
        for sql in expand_template(spec):
            seen.setdefault(sql, None)
    return list(seen)
