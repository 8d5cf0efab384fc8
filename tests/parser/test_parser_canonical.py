"""Canonical form: rewrites of one query share a key; two queries share a key iff their vectors are equal.

The oracle for "equal vectors" is PostgreSQL itself, over a grid table holding every cell of a small
product domain exactly once: a predicate's cell set is the set of grid ids it selects.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from random import Random
from typing import Any

import numpy as np
import psycopg
import pytest
from hypothesis import strategies as st

from parser import plan_query
from tests.fixtures.parser_catalog import ADULT, CATALOG
from tests.fixtures.parser_strategies import random_cases

EXAMPLES = int(os.environ.get("PARSER_CANON_EXAMPLES", "300"))
GRID = {"age": (17, 90), "sex": (0, 1), "race": (0, 4), "relationship": (0, 5)}
Ast = tuple[Any, ...]


def keys(sql: str) -> list[str]:
    return [q.key for q in plan_query(sql, CATALOG).queries]


# -- a tiny predicate AST, rendered with random rewrites ------------------------------------------------


def gen_ast(r: Random, depth: int = 2) -> Ast:
    if depth == 0 or r.random() < 0.4:
        attr = r.choice(sorted(GRID))
        lo, hi = GRID[attr]
        kind = r.choice(["cmp", "cmp", "between", "in"])
        if kind == "cmp":
            return ("cmp", attr, r.choice(["=", "<>", "<", "<=", ">", ">="]), r.randint(lo - 1, hi + 1))
        if kind == "between":
            a = r.randint(lo, hi)
            return ("between", attr, a, r.randint(a, hi), r.random() < 0.3)
        return ("in", attr, sorted({r.randint(lo, hi) for _ in range(r.randint(1, 4))}), r.random() < 0.3)
    op = r.choice(["and", "and", "or", "not"])
    if op == "not":
        return ("not", gen_ast(r, depth - 1))
    return (op, [gen_ast(r, depth - 1) for _ in range(r.randint(2, 3))])


def _col(r: Random, attr: str, q: str) -> str:
    return r.choice([attr, attr.upper(), f'"{attr}"', f"{q}{attr}" if q else attr])


def render(ast: Ast, r: Random, q: str = "") -> str:
    """SQL text for ``ast`` with a random choice of equivalent spellings at every node."""
    tag = ast[0]
    if tag == "cmp":
        _, attr, op, v = ast
        c = _col(r, attr, q)
        choice = r.randint(0, 4)
        if choice == 0 and op == "<":
            return f"{c} <= {v - 1}"
        if choice == 0 and op == ">":
            return f"{c} >= {v + 1}"
        if choice == 1 and op == "<>":
            return f"NOT ({c} = {v})"
        if choice == 2:
            flip = {"<": ">", ">": "<", "<=": ">=", ">=": "<="}.get(op, op)
            return f"{v} {flip} {c}"
        if choice == 3 and op == "<>":
            return f"{c} != {v}"
        return f"{c} {op} {v}"
    if tag == "between":
        _, attr, a, b, neg = ast
        c = _col(r, attr, q)
        if r.random() < 0.5:
            text = f"{c} BETWEEN {a} AND {b}"
        else:
            text = f"({c} >= {a} AND {_col(r, attr, q)} <= {b})"
        if neg:
            return f"{c} NOT BETWEEN {a} AND {b}" if r.random() < 0.5 else f"NOT ({text})"
        return text
    if tag == "in":
        _, attr, vals, neg = ast
        vals = list(vals)
        r.shuffle(vals)
        if r.random() < 0.5:
            body = f"{_col(r, attr, q)} {'NOT ' if neg else ''}IN ({', '.join(map(str, vals))})"
            return body
        if neg:
            return "(" + " AND ".join(f"{_col(r, attr, q)} <> {v}" for v in vals) + ")"
        return "(" + " OR ".join(f"{_col(r, attr, q)} = {v}" for v in vals) + ")"
    if tag == "not":
        inner = ast[1]
        if inner[0] in ("and", "or") and r.random() < 0.5:
            # De Morgan
            dual = "or" if inner[0] == "and" else "and"
            return render((dual, [("not", x) for x in inner[1]]), r, q)
        if r.random() < 0.2:
            return f"NOT (NOT ({render(ast, r, q)}))"
        return f"NOT ({render(inner, r, q)})"
    parts = list(ast[1])
    r.shuffle(parts)
    if r.random() < 0.3:
        parts.append(r.choice(parts))  # a redundant repeat: idempotence
    sep = f" {tag.upper() if r.random() < 0.7 else tag}{r.choice([' ', chr(10) + '  '])}"
    return "(" + sep.join(render(p, r, q) for p in parts) + ")"


def render_query(ast: Ast, r: Random) -> str:
    table, q = r.choice([("adult", ""), ("adult", "adult."), ("public.adult AS a", "a."), ('"adult" x', "x."),
                         ("ADULT", "")])
    agg = r.choice(["COUNT(*)", "count(1)", "Count(age)", "SUM(1)", "count(*) AS n"])
    select = r.choice(["SELECT", "select", "SeLeCt"])
    return f"{select} {agg}\nFROM {table}   WHERE {render(ast, r, q)}"


@pytest.mark.slow
@random_cases(EXAMPLES, seed=st.integers(0, 2**63))
def test_rewrites_share_one_canonical_form(seed: int) -> None:
    r = Random(seed)
    ast = gen_ast(r)
    texts = [render_query(ast, r) for _ in range(5)]
    forms = {tuple(keys(t)) for t in texts}
    assert len(forms) == 1, "\n".join(texts) + "\n" + "\n".join(map(str, forms))
    queries = [plan_query(t, CATALOG).queries for t in texts]
    assert all(qs == queries[0] and hash(qs) == hash(queries[0]) for qs in queries)


# -- key equality <=> cell-set equality, with PostgreSQL as the oracle ----------------------------------


@pytest.fixture(scope="module")
def grid(adult_conn: psycopg.Connection) -> psycopg.Connection:
    adult_conn.execute("DROP TABLE IF EXISTS pg_temp.grid")
    adult_conn.execute("CREATE TEMP TABLE grid (id serial, age int, sex int, race int, relationship int)")
    adult_conn.execute(
        "INSERT INTO grid (age, sex, race, relationship) SELECT a, s, r, l FROM generate_series(17, 90) a, "
        "generate_series(0, 1) s, generate_series(0, 4) r, generate_series(0, 5) l")
    return adult_conn


def cells(conn: psycopg.Connection, where: str) -> frozenset[int]:
    row = conn.execute(f"SELECT coalesce(array_agg(id), '{{}}') FROM grid WHERE {where}").fetchone()
    assert row is not None
    return frozenset(row[0])


@random_cases(EXAMPLES, seed=st.integers(0, 2**63))
def test_same_key_iff_same_cells(seed: int, grid: psycopg.Connection) -> None:
    r = Random(seed)
    a = gen_ast(r, 2)
    # Half the time compare with a perturbation of a (often equal sets, sometimes not), else a fresh one.
    b = gen_ast(r, 2) if r.random() < 0.5 else ("and", [a, gen_ast(r, 0)]) if r.random() < 0.5 else (
        "or", [a, gen_ast(r, 0)])
    wa, wb = render(a, r), render(b, r)
    ka = keys(f"SELECT COUNT(*) FROM adult WHERE {wa}")
    kb = keys(f"SELECT COUNT(*) FROM adult WHERE {wb}")
    same_cells = cells(grid, wa) == cells(grid, wb)
    assert (ka == kb) == same_cells, (wa, wb, ka, kb)


def measured(sql: str) -> tuple[str, float]:
    """(key of the measured query, factor applied to its answer) of a one-aggregate, ungrouped statement."""
    plan = plan_query(sql, CATALOG)
    ((qi,),), ((factor,),) = plan.slots, plan.factors
    return plan.queries[qi].key, factor


def weights(conn: psycopg.Connection, value: str, where: str) -> dict[int, int]:
    """The query vector as {grid cell id: weight}, zero weights left out."""
    w = "1" if value == "*" else value
    rows = conn.execute(f"SELECT id, {w} FROM grid WHERE ({where}) AND {w} <> 0").fetchall()
    return {int(i): int(v) for i, v in rows}


@random_cases(EXAMPLES, seed=st.integers(0, 2**63))
def test_sums_and_counts_same_key_iff_same_vector(seed: int, grid: psycopg.Connection) -> None:
    """COUNT and SUM over any attribute: equal keys exactly when the weight vectors are equal."""
    r = Random(seed)
    a = gen_ast(r, 1)
    b = a if r.random() < 0.4 else gen_ast(r, 1)
    va, vb = r.choice(["*", "age", "sex", "race", "relationship"]), r.choice(["*", "sex", "race"])
    wa, wb = render(a, r), render(b, r)
    sa, sb = (f"SELECT {'COUNT(*)' if v == '*' else f'SUM({v})'} FROM adult WHERE {w}" for v, w in
              ((va, wa), (vb, wb)))
    ka, kb = measured(sa), measured(sb)
    same = weights(grid, va, wa) == weights(grid, vb, wb)
    assert (ka == kb) == same, (sa, sb, ka, kb)


# -- specific equivalences and distinctions ------------------------------------------------------------


EQUIVALENT = [
    ["SELECT COUNT(*) FROM adult WHERE age BETWEEN 30 AND 39",
     "select count(*) from adult where age >= 30 and age < 40",
     "SELECT count(1) FROM public.adult a WHERE a.age <= 39 AND 30 <= a.age",
     "SELECT COUNT(*) AS n FROM adult WHERE age > 29 AND age < 40 AND age >= 17",
     "SELECT SUM(1) FROM adult WHERE age IN (30,31,32,33,34,35,36,37,38,39)"],
    ["SELECT COUNT(*) FROM adult WHERE race IN (1, 2)",
     "SELECT COUNT(*) FROM adult WHERE race = 2 OR race = 1",
     "SELECT COUNT(*) FROM adult WHERE NOT (race NOT IN (2, 1))",
     "SELECT COUNT(*) FROM adult WHERE race BETWEEN 1 AND 2",
     "SELECT COUNT(*) FROM adult WHERE (race = 1 OR race = 2) AND (race = 1 OR race = 2 OR sex = 0)"],
    ["SELECT COUNT(*) FROM adult", "SELECT COUNT(*) FROM adult WHERE age >= 17",
     "SELECT COUNT(*) FROM adult WHERE sex IN (0, 1)", "SELECT COUNT(*) FROM adult WHERE sex = 1 OR sex <> 1",
     "SELECT COUNT(race) FROM adult", "SELECT COUNT(*) FROM adult WHERE age IS NOT NULL"],
    ["SELECT COUNT(*) FROM adult WHERE sex = 1 AND race = 2", "SELECT COUNT(*) FROM adult WHERE race = 2 AND sex = 1",
     "SELECT COUNT(*) FROM adult WHERE sex = 1 AND race = 2 AND sex = 1",
     "SELECT COUNT(*) FROM adult WHERE NOT (sex <> 1 OR race <> 2)"],
    ["SELECT COUNT(*) FROM adult WHERE sex = 1 AND sex = 0", "SELECT COUNT(*) FROM adult WHERE age > 95",
     "SELECT COUNT(*) FROM adult WHERE age = NULL", "SELECT COUNT(*) FROM adult WHERE FALSE",
     "SELECT SUM(age) FROM adult WHERE race = 9", "SELECT COUNT(*) FROM adult WHERE age IS NULL"],
    ["SELECT SUM(sex) FROM adult", "SELECT COUNT(*) FROM adult WHERE sex = 1"],
    ["SELECT SUM(age) FROM adult WHERE age = 30", "SELECT SUM(30) FROM adult WHERE age = 30"],
    ["SELECT SUM(hours_per_week) FROM adult", "SELECT SUM(hours_per_week) FROM adult WHERE hours_per_week > 0",
     "SELECT SUM(CAST(hours_per_week AS BIGINT)) FROM adult WHERE hours_per_week <> 0"],
]

DIFFERENT = [
    "SELECT COUNT(*) FROM adult WHERE age BETWEEN 30 AND 39",
    "SELECT COUNT(*) FROM adult WHERE age BETWEEN 30 AND 40",
    "SELECT SUM(age) FROM adult WHERE age BETWEEN 30 AND 39",
    "SELECT SUM(hours_per_week) FROM adult WHERE age BETWEEN 30 AND 39",
    "SELECT COUNT(*) FROM adult WHERE race = 1",
    "SELECT COUNT(*) FROM adult WHERE race = 1 AND sex = 1",
    "SELECT COUNT(*) FROM adult WHERE race = 1 OR sex = 1",
    "SELECT COUNT(*) FROM adult WHERE sex = 1",
    "SELECT COUNT(*) FROM adult",
    "SELECT SUM(age) FROM adult",
    "SELECT SUM(education_num) FROM adult",
    "SELECT COUNT(*) FROM adult WHERE age = 30",
    "SELECT SUM(age) FROM adult WHERE age = 31",
]


@pytest.mark.parametrize("group", EQUIVALENT, ids=lambda g: g[0][:50])
def test_equivalent_spellings(group: list[str]) -> None:
    forms = [keys(s) for s in group]
    assert all(f == forms[0] for f in forms), list(zip(group, forms, strict=True))


def test_different_queries_have_different_keys() -> None:
    ks = [tuple(keys(s)) for s in DIFFERENT]
    assert len(set(ks)) == len(ks)


def test_tautology_drops_out_of_the_marginal() -> None:
    (q,) = plan_query("SELECT COUNT(*) FROM adult WHERE age >= 17 AND sex IN (0, 1)", CATALOG).queries
    assert q.marginal == () and q.sensitivity == 1
    assert np.array_equal(q.vector(ADULT), np.ones(()))


@pytest.mark.process
def test_keys_are_stable_across_processes() -> None:
    """Keys are a database key for stored answers: no dependence on hash seeds or process state."""
    sqls = [g[0] for g in EQUIVALENT] + DIFFERENT
    here = [keys(s) for s in sqls]
    code = (
        "import json, sys\n"
        "from tests.fixtures.parser_catalog import CATALOG\nfrom parser import plan_query\n"
        "sqls = json.loads(sys.stdin.read())\n"
        "print(json.dumps([[q.key for q in plan_query(s, CATALOG).queries] for s in sqls]))\n"
    )
    repo = Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONHASHSEED="12345")
    # `python -c` puts its working directory (the repository) first on the path.
    out = subprocess.run([sys.executable, "-c", code], input=json.dumps(sqls), capture_output=True, text=True,
                         check=True, env=env, cwd=repo)
    assert json.loads(out.stdout) == here
