"""Hypothesis strategies: random supported SQL over Adult (and the nullable/text table), as BI tools write it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

# Attribute pools kept small so every query's marginal stays a few hundred thousand cells at most.
WHERE_ATTRS = {"age": (17, 90), "sex": (0, 1), "race": (0, 4), "relationship": (0, 5), "education_num": (0, 15),
               "hours_per_week": (0, 98), "income_gt_50k": (0, 1)}
GROUP_ATTRS = ["sex", "race", "relationship", "income_gt_50k"]
VALUE_ATTRS = ["age", "hours_per_week", "education_num"]
CMP_OPS = ["=", "<>", "!=", "<", "<=", ">", ">="]


@dataclass
class Gen:
    """Accumulates bound parameters while a query is drawn."""

    use_params: bool
    params: list[Any] = field(default_factory=list)
    qualifier: str = ""

    def lit(self, draw: st.DrawFn, v: int) -> str:
        if self.use_params and draw(st.integers(0, 3)) == 0:
            self.params.append(draw(st.sampled_from([v, str(v)])))
            return f"${len(self.params)}"
        return str(v)

    def col(self, draw: st.DrawFn, name: str) -> str:
        style = draw(st.integers(0, 5))
        if style == 0:
            return f'"{name}"'
        if style == 1:
            return name.upper()
        return self.qualifier + name


@st.composite
def value_for(draw: st.DrawFn, attr: str) -> int:
    lo, hi = WHERE_ATTRS[attr]
    if draw(st.integers(0, 9)) == 0:
        return draw(st.integers(lo - 5, hi + 5))  # sometimes outside the declared domain
    return draw(st.integers(lo, hi))


@st.composite
def atom(draw: st.DrawFn, g: Gen, attrs: list[str]) -> str:
    attr = draw(st.sampled_from(attrs))
    c = g.col(draw, attr)
    kind = draw(st.sampled_from(["cmp", "cmp", "cmp", "between", "notbetween", "in", "notin", "isnull"]))
    if kind == "cmp":
        op = draw(st.sampled_from(CMP_OPS))
        v = g.lit(draw, draw(value_for(attr)))
        if draw(st.booleans()):
            flipped = {"<": ">", ">": "<", "<=": ">=", ">=": "<="}.get(op, op)
            return f"{v} {flipped} {c}"
        return f"{c} {op} {v}"
    if kind in ("between", "notbetween"):
        a, b = draw(value_for(attr)), draw(value_for(attr))
        neg = "NOT " if kind == "notbetween" else ""
        return f"{c} {neg}BETWEEN {g.lit(draw, a)} AND {g.lit(draw, b)}"
    if kind in ("in", "notin"):
        vals = draw(st.lists(value_for(attr), min_size=1, max_size=4))
        neg = "NOT " if kind == "notin" else ""
        return f"{c} {neg}IN ({', '.join(g.lit(draw, v) for v in vals)})"
    return f"{c} IS {'NOT ' if draw(st.booleans()) else ''}NULL"


@st.composite
def predicate(draw: st.DrawFn, g: Gen, attrs: list[str], depth: int = 2) -> str:
    if depth == 0 or draw(st.integers(0, 2)) == 0:
        return draw(atom(g, attrs))
    op = draw(st.sampled_from(["AND", "AND", "OR", "NOT"]))
    if op == "NOT":
        return f"NOT ({draw(predicate(g, attrs, depth - 1))})"
    parts = [draw(predicate(g, attrs, depth - 1)) for _ in range(draw(st.integers(2, 3)))]
    return "(" + f" {op} ".join(parts) + ")"


AGGS = ["COUNT(*)", "count(1)", "COUNT({v})", "SUM({v})", "AVG({v})", "SUM({v}) / COUNT(*)",
        "SUM({v}) + COUNT(*)", "count(*) * 2", "sum(1)"]


@dataclass
class Case:
    sql: str
    params: list[Any]
    n_keys: int
    ordered: bool


@st.composite
def adult_query(draw: st.DrawFn) -> Case:
    """A random supported query over Adult whose marginals stay small (at most 4 attributes)."""
    g = Gen(use_params=draw(st.booleans()))
    table = draw(st.sampled_from(["adult", "public.adult", "adult a", "ADULT AS t", '"public"."adult"']))
    alias = table.split()[-1] if " " in table else ""
    if alias:
        g.qualifier = draw(st.sampled_from(["", f"{alias}."]))
    elif draw(st.booleans()):
        g.qualifier = "adult."
    where_attrs = draw(st.lists(st.sampled_from(sorted(WHERE_ATTRS)), min_size=1, max_size=3, unique=True))
    groups = draw(st.lists(st.sampled_from(GROUP_ATTRS), max_size=2, unique=True))
    value = draw(st.sampled_from(VALUE_ATTRS))
    if len(set(where_attrs) | set(groups) | {value}) > 4:
        groups = groups[:1]
        where_attrs = where_attrs[:2]
    aggs = draw(st.lists(st.sampled_from(AGGS), min_size=1, max_size=3))
    items = [g.col(draw, a) for a in groups] + [a.format(v=g.col(draw, value)) for a in aggs]
    select = draw(st.sampled_from(["SELECT", "select", "Select"]))
    sql = f"{select} {', '.join(items)} FROM {table}"
    if draw(st.integers(0, 5)) > 0:
        sql += f" WHERE {draw(predicate(g, where_attrs))}"
    if groups:
        by = [str(i + 1) if draw(st.booleans()) else g.col(draw, a) for i, a in enumerate(groups)]
        sql += " GROUP BY " + ", ".join(by)
    ordered = False
    if groups and draw(st.integers(0, 3)) == 0:
        # HAVING count(*) > 0 removes the empty groups PostgreSQL never shows, so LIMIT lines up.
        keys = ", ".join(str(i + 1) for i in range(len(groups)))
        desc = draw(st.sampled_from(["", " DESC"]))
        sql += f" HAVING COUNT(*) > 0 ORDER BY {keys}{desc} LIMIT {draw(st.integers(0, 6))}"
        if draw(st.booleans()):
            sql += f" OFFSET {draw(st.integers(0, 3))}"
        ordered = True
    return Case(sql, g.params, len(groups), ordered)


PEOPLE_VALUES: dict[str, list[Any]] = {
    "city": ["'Berlin'", "'Lyon'", "'Oslo'", "'Paris'"],
    "dept": ["'eng'", "'ops'", "'sales'", "'hr'"],
    "score": [str(i) for i in range(-7, 13)],
    "level": [str(i) for i in range(0, 6)],
}


@st.composite
def people_atom(draw: st.DrawFn) -> str:
    attr = draw(st.sampled_from(sorted(PEOPLE_VALUES)))
    vals = PEOPLE_VALUES[attr]
    numeric = attr in ("score", "level")
    kinds = ["eq", "ne", "in", "notin", "isnull", "notnull"] + (["lt", "ge", "between"] if numeric else [])
    kind = draw(st.sampled_from(kinds))
    v = draw(st.sampled_from(vals))
    if kind == "eq":
        return f"{attr} = {v}"
    if kind == "ne":
        return f"{attr} <> {v}"
    if kind == "lt":
        return f"{attr} < {v}"
    if kind == "ge":
        return f"{attr} >= {v}"
    if kind == "between":
        return f"{attr} BETWEEN {v} AND {draw(st.sampled_from(vals))}"
    if kind in ("in", "notin"):
        items = draw(st.lists(st.sampled_from(vals + ["NULL"]), min_size=1, max_size=3))
        return f"{attr} {'NOT ' if kind == 'notin' else ''}IN ({', '.join(items)})"
    return f"{attr} IS {'NOT ' if kind == 'notnull' else ''}NULL"


@st.composite
def people_predicate(draw: st.DrawFn, depth: int = 2) -> str:
    if depth == 0 or draw(st.integers(0, 2)) == 0:
        return draw(people_atom())
    op = draw(st.sampled_from(["AND", "OR", "NOT"]))
    if op == "NOT":
        return f"NOT ({draw(people_predicate(depth - 1))})"
    return "(" + f" {op} ".join(draw(people_predicate(depth - 1)) for _ in range(2)) + ")"


@st.composite
def people_query(draw: st.DrawFn) -> Case:
    groups = draw(st.lists(st.sampled_from(["city", "dept", "level"]), max_size=2, unique=True))
    aggs = draw(st.lists(st.sampled_from(["COUNT(*)", "COUNT(score)", "COUNT(city)", "SUM(score)", "AVG(score)",
                                          "SUM(level)", "AVG(level)"]), min_size=1, max_size=3))
    sql = f"SELECT {', '.join(groups + aggs)} FROM hr.people"
    if draw(st.integers(0, 4)) > 0:
        sql += f" WHERE {draw(people_predicate())}"
    if groups:
        sql += " GROUP BY " + ", ".join(groups)
    return Case(sql, [], len(groups), False)
