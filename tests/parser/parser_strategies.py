"""Random supported SQL over Adult (and the nullable/text table), as BI tools write it.

Generators take a ``random.Random``; hypothesis drives them with a drawn seed (cheap draws, replayable
failures) and plain seeded loops can reuse them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from random import Random
from typing import Any

from hypothesis import strategies as st

# Attribute pools kept small so every query's marginal stays a few hundred thousand cells at most.
WHERE_ATTRS = {"age": (17, 90), "sex": (0, 1), "race": (0, 4), "relationship": (0, 5), "education_num": (0, 15),
               "hours_per_week": (0, 98), "income_gt_50k": (0, 1)}
GROUP_ATTRS = ["sex", "race", "relationship", "income_gt_50k"]
# GROUP BY expressions over one attribute (buckets), with the attribute they read.
GROUP_EXPRS = {"age / 10": "age", "floor(hours_per_week / 10.0) * 10": "hours_per_week",
               "CASE WHEN education_num >= 13 THEN 'degree' WHEN education_num < 9 THEN 'none' END": "education_num",
               "(age - 17) / 5 * 5 + 17": "age"}
VALUE_ATTRS = ["age", "hours_per_week", "education_num"]
CMP_OPS = ["=", "<>", "!=", "<", "<=", ">", ">="]


@dataclass
class Gen:
    """Accumulates bound parameters while a query is drawn."""

    use_params: bool
    params: list[Any] = field(default_factory=list)
    qualifier: str = ""

    def lit(self, r: Random, v: int) -> str:
        if self.use_params and r.randint(0, 3) == 0:
            self.params.append(r.choice([v, str(v)]))
            return f"${len(self.params)}"
        return str(v)

    def col(self, r: Random, name: str) -> str:
        style = r.randint(0, 5)
        if style == 0:
            return f'"{name}"'
        if style == 1:
            return name.upper()
        return self.qualifier + name


def value_for(r: Random, attr: str) -> int:
    lo, hi = WHERE_ATTRS[attr]
    if r.randint(0, 9) == 0:
        return r.randint(lo - 5, hi + 5)  # sometimes outside the declared domain
    return r.randint(lo, hi)


def atom(r: Random, g: Gen, attrs: list[str]) -> str:
    attr = r.choice(attrs)
    c = g.col(r, attr)
    kind = r.choice(["cmp", "cmp", "cmp", "between", "notbetween", "in", "notin", "isnull", "rare"])
    if kind == "rare":
        # Spellings BI tools and drivers also produce; each must keep PostgreSQL's semantics.
        v = value_for(r, attr)
        form = r.randint(0, 7)
        if form == 0:
            return f"{c} IS {'NOT ' if r.random() < 0.5 else ''}DISTINCT FROM {g.lit(r, v)}"
        if form == 1:
            # Literals only: PostgreSQL cannot type untyped parameters inside ARRAY[...].
            items = ", ".join(str(value_for(r, attr)) for _ in range(r.randint(1, 3)))
            return f"{c} {r.choice(['=', '<>', '<', '>='])} {r.choice(['ANY', 'ALL'])}(ARRAY[{items}])"
        if form == 2:
            return f"{c}::{r.choice(['int', 'bigint', 'numeric', 'float8'])} {r.choice(CMP_OPS)} {v}"
        if form == 3:
            return f"{c} {r.choice(CMP_OPS)} '{v}'"
        if form == 4:
            return f"{c} {r.choice(CMP_OPS)} {v}.5"
        if form == 5:
            return f"{c} {'NOT ' if r.random() < 0.5 else ''}IN ({v}, NULL)"
        if form == 6:
            return r.choice(["1 = 1", "TRUE", "FALSE", "NULL", "2 < 1", "NOT (1 <> 1)"])
        return f"{c} BETWEEN SYMMETRIC {g.lit(r, v)} AND {g.lit(r, value_for(r, attr))}"
    if kind == "cmp":
        op = r.choice(CMP_OPS)
        lit = g.lit(r, value_for(r, attr))
        if r.random() < 0.5:
            flipped = {"<": ">", ">": "<", "<=": ">=", ">=": "<="}.get(op, op)
            return f"{lit} {flipped} {c}"
        return f"{c} {op} {lit}"
    if kind in ("between", "notbetween"):
        a, b = value_for(r, attr), value_for(r, attr)
        neg = "NOT " if kind == "notbetween" else ""
        return f"{c} {neg}BETWEEN {g.lit(r, a)} AND {g.lit(r, b)}"
    if kind in ("in", "notin"):
        vals = [value_for(r, attr) for _ in range(r.randint(1, 4))]
        neg = "NOT " if kind == "notin" else ""
        return f"{c} {neg}IN ({', '.join(g.lit(r, v) for v in vals)})"
    return f"{c} IS {'NOT ' if r.random() < 0.5 else ''}NULL"


def predicate(r: Random, g: Gen, attrs: list[str], depth: int = 2) -> str:
    if depth == 0 or r.randint(0, 2) == 0:
        return atom(r, g, attrs)
    op = r.choice(["AND", "AND", "OR", "NOT"])
    if op == "NOT":
        return f"NOT ({predicate(r, g, attrs, depth - 1)})"
    parts = [predicate(r, g, attrs, depth - 1) for _ in range(r.randint(2, 3))]
    return "(" + f" {op} ".join(parts) + ")"


AGGS = ["COUNT(*)", "count(1)", "COUNT({v})", "SUM({v})", "AVG({v})", "SUM({v}) / COUNT(*)",
        "SUM({v}) + COUNT(*)", "count(*) * 2", "sum(1)", "SUM(CASE WHEN {v} > 40 THEN 1 ELSE 0 END)",
        "AVG(CASE WHEN {v} < 50 THEN {v} END)", "COUNT(CASE WHEN {v} BETWEEN 20 AND 60 THEN 1 END)",
        "SUM({v}) FILTER (WHERE {v} <> 45)"]


@dataclass
class Case:
    sql: str
    params: list[Any]
    n_keys: int
    ordered: bool


def adult_query(r: Random) -> Case:
    """A random supported query over Adult whose marginals stay small (at most 4 attributes)."""
    g = Gen(use_params=r.random() < 0.5)
    table = r.choice(["adult", "public.adult", "adult a", "ADULT AS t", '"public"."adult"'])
    alias = table.split()[-1] if " " in table else ""
    if alias:
        g.qualifier = r.choice(["", f"{alias}."])
    elif r.random() < 0.5:
        g.qualifier = "adult."
    where_attrs = r.sample(sorted(WHERE_ATTRS), r.randint(1, 3))
    groups = r.sample(GROUP_ATTRS, r.randint(0, 2))
    value = r.choice(VALUE_ATTRS)
    if groups and r.random() < 0.25:
        groups[0] = r.choice(sorted(GROUP_EXPRS))
    read = {GROUP_EXPRS.get(a, a) for a in groups}
    if len(set(where_attrs) | read | {value}) > 4:
        groups = groups[:1]
        where_attrs = where_attrs[:2]
    aggs = [r.choice(AGGS) for _ in range(r.randint(1, 3))]
    items = [a if a in GROUP_EXPRS else g.col(r, a) for a in groups] + [a.format(v=g.col(r, value)) for a in aggs]
    select = r.choice(["SELECT", "select", "Select"])
    sql = f"{select} {', '.join(items)} FROM {table}"
    if r.randint(0, 5) > 0:
        sql += f" WHERE {predicate(r, g, where_attrs)}"
    if groups:
        by = [str(i + 1) if r.random() < 0.5 else (a if a in GROUP_EXPRS else g.col(r, a))
              for i, a in enumerate(groups)]
        sql += " GROUP BY " + ", ".join(by)
    ordered = False
    if groups and r.randint(0, 3) == 0:
        # HAVING count(*) > 0 removes the empty groups PostgreSQL never shows, so LIMIT lines up.
        keys = ", ".join(str(i + 1) for i in range(len(groups)))
        desc = r.choice(["", " DESC"])
        sql += f" HAVING COUNT(*) > 0 ORDER BY {keys}{desc} LIMIT {r.randint(0, 6)}"
        if r.random() < 0.5:
            sql += f" OFFSET {r.randint(0, 3)}"
        ordered = True
    return Case(sql, g.params, len(groups), ordered)


PEOPLE_VALUES: dict[str, list[Any]] = {
    "city": ["'Berlin'", "'Lyon'", "'Oslo'", "'Paris'"],
    "dept": ["'eng'", "'ops'", "'sales'", "'hr'"],
    "score": [str(i) for i in range(-7, 13)],
    "level": [str(i) for i in range(0, 6)],
}


def people_atom(r: Random) -> str:
    attr = r.choice(sorted(PEOPLE_VALUES))
    vals = PEOPLE_VALUES[attr]
    numeric = attr in ("score", "level")
    kinds = ["eq", "ne", "in", "notin", "isnull", "notnull"] + (["lt", "ge", "between"] if numeric else [])
    kind = r.choice(kinds)
    v = r.choice(vals)
    if kind == "eq":
        return f"{attr} = {v}"
    if kind == "ne":
        return f"{attr} <> {v}"
    if kind == "lt":
        return f"{attr} < {v}"
    if kind == "ge":
        return f"{attr} >= {v}"
    if kind == "between":
        return f"{attr} BETWEEN {v} AND {r.choice(vals)}"
    if kind in ("in", "notin"):
        items = [r.choice([*vals, "NULL"]) for _ in range(r.randint(1, 3))]
        return f"{attr} {'NOT ' if kind == 'notin' else ''}IN ({', '.join(items)})"
    return f"{attr} IS {'NOT ' if kind == 'notnull' else ''}NULL"


def people_predicate(r: Random, depth: int = 2) -> str:
    if depth == 0 or r.randint(0, 2) == 0:
        return people_atom(r)
    op = r.choice(["AND", "OR", "NOT"])
    if op == "NOT":
        return f"NOT ({people_predicate(r, depth - 1)})"
    return "(" + f" {op} ".join(people_predicate(r, depth - 1) for _ in range(2)) + ")"


def people_query(r: Random) -> Case:
    groups = r.sample(["city", "dept", "level"], r.randint(0, 2))
    aggs = [r.choice(["COUNT(*)", "COUNT(score)", "COUNT(city)", "SUM(score)", "AVG(score)", "SUM(level)",
                      "AVG(level)"]) for _ in range(r.randint(1, 3))]
    sql = f"SELECT {', '.join(groups + aggs)} FROM hr.people"
    if r.randint(0, 4) > 0:
        sql += f" WHERE {people_predicate(r)}"
    if groups:
        sql += " GROUP BY " + ", ".join(groups)
    return Case(sql, [], len(groups), False)


def adult_queries() -> st.SearchStrategy[Case]:
    # A drawn seed keeps hypothesis' per-example overhead tiny; a failure prints its (replayable) seed.
    return st.integers(0, 2**63).map(lambda seed: adult_query(Random(seed)))


def people_queries() -> st.SearchStrategy[Case]:
    return st.integers(0, 2**63).map(lambda seed: people_query(Random(seed)))
