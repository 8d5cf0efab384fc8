"""Exact-answer SQL the parser generates for PostgreSQL: linear query answers and marginal histograms.

Every attribute is read through its *cell expression* (its column type's ``cell_sql``), which maps each
stored value to one cell of the declared domain, so PostgreSQL's exact answers are those of the domain
histogram. Clipping into the domain is what bounds a row's contribution, hence the sensitivity.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from pgcore.identifiers import quote_ident

from ..coltypes.base import clamp_sql
from ..coltypes.text import quote_literal
from ..model.linear import LinearQuery, space_of
from ..model.predicate import Ranges, merge_ranges
from ..model.schema import Attribute, TableSchema
from .bounding import bounding_seed, groups_seed, table_ref
from .cellsql import attr_condition, attr_sql, cell_expr, counted_expr

__all__ = ["EXACT_SESSION_SQL", "MAX_COLUMNS", "bounding_seed", "answers_sql", "answers_sql_batches", "cell_expr", "clamp_sql", "marginal_sql", "predicate_sql", "raw_predicate_sql",
           "quote_ident", "quote_literal", "table_ref", "groups_seed", "unit_cells_sql",
           "derived_marginal_sql", "derived_index"]

MAX_COLUMNS = 1600
"""PostgreSQL allows at most 1664 entries in a target list; answers_sql_batches stays below."""


def unit_cells_sql(table: TableSchema, cells: Sequence[str], where: str | None = None) -> str:
    """``SELECT lapras_unit, c0, c1, ...``: the distinct (unit, cell) pairs of the table's rows satisfying
    ``where``, each unit kept in at most ``table.unit_cells`` cells (g).

    ``cells`` are SQL expressions over the table's columns (cell expressions, partition keys). All of a
    unit's rows are read (the k-row bound is for counts and sums: presence needs none, g bounds it); its
    cells are kept in the order of a seeded hash of the unit's and the cell's text, so the choice depends on that unit's
    own rows only (one unit changes at most its own kept cells) and is the same in every process. Rows with
    a NULL unit are left out, as everywhere. On a table without a privacy unit every row is its own unit
    and is in one cell: nothing to bound (``lapras_unit`` is NULL there, so count rows, never distinct
    units). The caller counts what it needs: ``count(*)`` per cell is the number of units present in it.
    """
    names = [f"c{i}" for i in range(len(cells))]
    sel = "".join(f", {e} AS {n}" for e, n in zip(cells, names, strict=True))
    cond = f" WHERE {where}" if where else ""
    if table.privacy_unit is None:
        return f"SELECT NULL::bigint AS lapras_unit{sel} FROM {table_ref(table)}{cond}"
    unit = quote_ident(table.privacy_unit)
    ref = f"{quote_ident(table.schema)}.{quote_ident(table.name)}"
    pairs = f"SELECT DISTINCT {unit} AS lapras_unit{sel} FROM {ref} WHERE {unit} IS NOT NULL" + (
        f" AND ({where})" if where else "")
    if not names:
        return pairs
    cols = ", ".join(names)
    # The cell's text once per pair (OFFSET 0: not merged into the window's query, where the hash and the
    # tie-break would each compute it). The hash is of the unit and the cell: each unit's g cells are its
    # own draw, so no cell is the one every unit leaves out.
    texts = f"SELECT p.*, ROW({cols})::text AS lapras_cell FROM ({pairs}) AS p OFFSET 0"
    return (f"SELECT lapras_unit, {cols} FROM (SELECT lapras_unit, {cols}, row_number() OVER (PARTITION BY "
            f"lapras_unit ORDER BY hashtextextended(lapras_unit::text || ':' || lapras_cell, {groups_seed(table)}), "
            f"lapras_cell) AS lapras_unit_cell FROM ({texts}) AS q) AS b "
            f"WHERE b.lapras_unit_cell <= {int(table.unit_cells)}")


def _axis_sql(base: TableSchema, attr: str, cells: Sequence[Ranges], plain: bool) -> str:
    """A group axis per row: the cell value of a plain ``GROUP BY col`` (mapped to its index when read),
    else the group's index (NULL for a row in no group)."""
    a = base.attribute(attr)
    assert a is not None
    if plain:
        return cell_expr(a)
    whens = " ".join(f"WHEN {attr_condition(a, rs)} THEN {i}" for i, rs in enumerate(cells))
    return f"CASE {whens} END"


def _joint_axis_sql(base: TableSchema, keys: Sequence[LinearQuery]) -> str:
    """A joint group axis (an expression over several columns) per row: the index of the key whose cells
    hold the row (each key's cells as its count's predicate; NULL for a row in no group)."""
    whens = " ".join(f"WHEN {predicate_sql(base, q, cells_only=True)} THEN {i}" if not q.is_zero else ""
                     for i, q in enumerate(keys))
    return f"CASE {whens} END" if whens.strip() else "NULL"


def derived_marginal_sql(table: TableSchema, attrs: Sequence[str]) -> str:
    """``SELECT axis..., count(*) GROUP BY`` over the marginal ``attrs`` of a derived table
    (``parser.bind.distinct``): per cell, the units present in it (each unit in at most ``unit_cells`` cells of
    the whole derived table), or, with a counted column, its distinct (cell, value) pairs (each unit
    holding at most ``unit_cells`` of them); summed over the axes left out."""
    d = table.derived
    base: TableSchema = d.base
    exprs = [_joint_axis_sql(base, ax.joint) if ax.joint else _axis_sql(base, ax.attr, ax.cells, ax.plain(base))
             for ax in d.axes]
    if d.counted is not None:
        col = base.attribute(d.counted)
        assert col is not None
        exprs.append(counted_expr(col))  # the stored values, read as their cells where a cell is one value
    # A NULL axis is a row in no group (a CASE no key matches, a value outside a selected key set): left
    # out before the bound, so it takes none of the unit's g cells (plain axes are never nullable); NULL
    # values are not counted.
    conds = [f"{e} IS NOT NULL" for e in exprs]
    if d.within is not None:
        conds.insert(0, f"({predicate_sql(base, d.within)})")
    pairs = unit_cells_sql(base, exprs, " AND ".join(conds) or None)
    names = [a.name for a in table.attributes]
    pick = [f"c{names.index(a)}" for a in attrs]
    if d.counted is not None:
        # Each distinct (group, value) pair counts once, whichever units hold it.
        pairs = f"SELECT DISTINCT {', '.join(f'c{i}' for i in range(len(exprs)))} FROM ({pairs}) AS p"
    if not pick:
        return f"SELECT count(*) FROM ({pairs}) AS b"
    groups = ", ".join(str(i + 1) for i in range(len(pick)))
    return f"SELECT {', '.join(pick)}, count(*) FROM ({pairs}) AS b GROUP BY {groups}"


def derived_index(table: TableSchema, attr: str) -> Callable[[object], int | None]:
    """Reads one axis of ``derived_marginal_sql``'s rows back as the derived attribute's cell index."""
    d = table.derived
    base: TableSchema = d.base
    names = [a.name for a in table.attributes]
    i = names.index(attr)
    if not d.axes[i].plain(base):
        return lambda v: None if v is None else int(v)  # type: ignore[call-overload]
    src = base.attribute(d.axes[i].attr)
    assert src is not None
    return src.domain.index_of


EXACT_SESSION_SQL = ("SET TimeZone = 'UTC'", "SET DateStyle = 'ISO, MDY'", "SET IntervalStyle = 'postgres'",
                     "SET extra_float_digits = 1", "SET bytea_output = 'hex'")
"""Session settings every exact-answer connection runs first: row text (hashed by the contribution bound)
and literal parsing must not depend on a server's or role's defaults."""


def _weights_sql(attr: Attribute, weights: Sequence[float]) -> str:
    """A per-row expression's weight of each row, by its cell: the planner's own per-cell values (so the
    exact answer is the linear query's, whatever PostgreSQL's functions would compute)."""
    by_weight: dict[float, list[tuple[int, int]]] = {}
    for i, w in enumerate(weights):
        if w != 0:
            by_weight.setdefault(float(w), []).append((i, i))
    whens = " ".join(f"WHEN {attr_condition(attr, merge_ranges(rs))} THEN {w!r}" for w, rs in by_weight.items())
    return f"CASE {whens} ELSE 0 END" if whens else "0"


def _box_conditions(table: TableSchema, q: LinearQuery,
                    cond: Callable[[Attribute, Ranges], str | None]) -> list[list[str]]:
    """Per box of the query's predicate, the conditions ``cond`` writes for its attributes (those that
    say nothing, None or TRUE, left out)."""
    out = []
    for box in q.boxes:
        parts = []
        for name, rs in box:
            attr = table.attribute(name)
            assert attr is not None
            c = cond(attr, rs)
            if c is not None and c != "TRUE":
                parts.append(c)
        out.append(parts)
    return out


def _disjunction(boxes: list[str]) -> str:
    return boxes[0] if len(boxes) == 1 else " OR ".join(f"({b})" for b in boxes)


def predicate_sql(table: TableSchema, q: LinearQuery, cells_only: bool = False) -> str:
    """The query's predicate (a union of disjoint boxes) as a SQL condition: plain comparisons on the stored
    columns where exact, cell expressions otherwise (``cells_only``: cell expressions everywhere)."""
    if q.is_zero:
        return "FALSE"
    boxes = _box_conditions(table, q, lambda attr, rs: attr_sql(attr, rs, cells_only))
    return _disjunction([" AND ".join(parts) if parts else "TRUE" for parts in boxes])


def raw_predicate_sql(table: TableSchema, q: LinearQuery) -> str | None:
    """A condition on the stored columns that every row the query counts satisfies (implied by its cell
    predicate, column by column: ``ColumnType.raw_sql``), or None when it would not narrow the rows."""
    if q.is_zero:
        return "FALSE"
    boxes = _box_conditions(table, q, lambda attr, rs: attr.domain.raw_sql(quote_ident(attr.name), rs))
    if not all(boxes):
        return None  # a box with no condition on the stored columns: every row may be in it
    return _disjunction([" AND ".join(parts) for parts in boxes])


def answer_expr(table: TableSchema, q: LinearQuery, cells_only: bool = False) -> str:
    """One aggregate computing the query's exact answer as float8."""
    if q.is_zero:
        return "0::float8"
    pred = predicate_sql(table, q, cells_only)
    if q.value is None:
        weight = "1"
    else:
        attr = table.attribute(q.value)
        assert attr is not None
        weight = (q.expr if q.expr is not None else attr.domain.weight_sql(quote_ident(attr.name))
                  if q.weights is None else _weights_sql(attr, q.weights))
        factor = (table.sum_factors or {}).get(q.value) if q.weights is None and q.expr is None else None
        if factor is not None:
            weight = f"({weight}) * {factor}"  # the unit's sum in its group clamped (max_sum_per_group)
    inner = weight if pred == "TRUE" else f"CASE WHEN {pred} THEN {weight} ELSE 0 END"
    s = f"COALESCE(SUM({inner}), 0)::float8"
    return s if q.scale == 1 else f"({s} * {float(q.scale)!r})"


MAX_FILTER_PREDICATES = 64
"""Above this many distinct predicates answers_sql reads every row rather than writing a long WHERE."""


def _any_of(conds: Sequence[str]) -> str:
    return conds[0] if len(conds) == 1 else " OR ".join(f"({c})" for c in conds)


def _row_filter(table: TableSchema, queries: Sequence[LinearQuery], cells_only: bool = False) -> str | None:
    """A WHERE keeping the rows some query counts: the others add 0 to every answer. It lets PostgreSQL
    (and each shard) skip them before the per-query CASEs run. None when some query reads every row.

    Where a predicate still has cell expressions (a type without an exact plain form), the plain-column
    conditions it implies (``raw_predicate_sql``) come first, so the cell expressions run only on the rows
    those keep."""
    preds: list[str] = []
    raws: list[str] = []
    every_raw = not cells_only  # every query implies a plain condition (else their union implies nothing)
    all_plain = True  # every predicate is its plain condition: the union of those is the whole filter
    for q in queries:
        if q.is_zero:
            continue
        p = predicate_sql(table, q, cells_only)
        if p == "TRUE":
            return None
        if p in preds:
            continue
        preds.append(p)
        raw = raw_predicate_sql(table, q) if every_raw else None
        if raw is None:
            every_raw = False
        elif raw not in raws:
            raws.append(raw)
        all_plain = all_plain and raw == p
    if not preds or len(preds) > MAX_FILTER_PREDICATES:
        return None
    if all_plain and len(preds) > 1:
        # One condition for the union (a count and a sum over the same rows share it), not one per query:
        # a row outside them all would otherwise evaluate every query's condition.
        union = _union_sql(table, [q for q in queries if not q.is_zero])
        if union is not None:
            return None if union == "TRUE" else union
    exact = _any_of(preds)
    if not every_raw or not raws or all_plain:
        return exact
    return f"({_any_of(raws)})\n  AND ({exact})"


MAX_UNION_QUERIES = 16


def _union_sql(table: TableSchema, queries: Sequence[LinearQuery]) -> str | None:
    """The union of the queries' cells as one canonical set of disjoint boxes, in SQL (None when too many
    queries or boxes to bother)."""
    if len(queries) > MAX_UNION_QUERIES:
        return None
    space = space_of(table)
    union = space.any_of([space.any_of([space.all_of([space.cells(a, rs) for a, rs in box]) for box in q.boxes])
                          for q in queries])
    if union is True:
        return "TRUE"
    if union is False or space.count_boxes(union) > MAX_UNION_QUERIES:
        return None
    return _boxes_sql(table, space.attrs, space.boxes(union))


def _boxes_sql(table: TableSchema, attrs: Sequence[str], boxes: Iterable[dict[int, Ranges]]) -> str:
    """Disjoint boxes of a predicate space (level -> ranges over ``attrs``) as one SQL condition."""
    parts = []
    for box in boxes:
        conds = []
        for level, rs in sorted(box.items()):
            attr = table.attribute(attrs[level])
            assert attr is not None
            cond = attr_sql(attr, rs)
            if cond != "TRUE":
                conds.append(cond)
        parts.append(" AND ".join(conds) if conds else "TRUE")
    return _any_of(parts)


def answers_sql(table: TableSchema, queries: Sequence[LinearQuery], partial_by: str | None = None,
                cells_only: bool = False) -> str:
    """One row, one float8 column per query (in order): the exact answers, computed by PostgreSQL.

    ``partial_by`` (the upstream's partition key, on a table partitioned over shards) computes the sums per
    partition in an inner query grouped by that key, which a postgres_fdw coordinator pushes down whole to
    each shard, and adds the partial sums up. ``cells_only`` reads every attribute through its cell
    expression, with no plain-column conditions (the same answers, slower; kept for comparisons)."""
    if len(queries) > MAX_COLUMNS:
        raise ValueError(f"{len(queries)} queries exceed one SELECT's target list; use answers_sql_batches")
    if not queries:
        return "SELECT"
    cols = ",\n  ".join(f"{answer_expr(table, q, cells_only)} AS q{i}" for i, q in enumerate(queries))
    inner = f"SELECT\n  {cols}\nFROM {table_ref(table)}"
    rows = _row_filter(table, queries, cells_only)
    if rows is not None:
        inner += f"\nWHERE {rows}"
    if partial_by is None:
        return inner
    outer = ", ".join(f"COALESCE(SUM(q{i}), 0)::float8 AS q{i}" for i in range(len(queries)))
    return f"SELECT {outer} FROM ({inner}\nGROUP BY {partial_by}) AS partials"


def answers_sql_batches(table: TableSchema, queries: Sequence[LinearQuery],
                        max_columns: int = MAX_COLUMNS, partial_by: str | None = None) -> list[str]:
    """``answers_sql`` split into statements of at most ``max_columns`` queries each (concatenate results)."""
    return [answers_sql(table, queries[i : i + max_columns], partial_by)
            for i in range(0, len(queries), max_columns)]


def marginal_sql(table: TableSchema, attrs: Sequence[str], partial_by: str | None = None,
                 sums: Sequence[str] = (), counts: Sequence[str] = ()) -> str:
    """``SELECT cell(a)..., count(*) GROUP BY`` over the marginal ``attrs`` (their cell values, clipped).

    ``partial_by`` as for ``answers_sql``: counts per partition and cell, added up per cell. ``sums`` names
    attributes whose row terms of ``SUM(col)`` (``answer_expr``'s, clamped) are also added up per cell, one
    float8 column each after the count, then ``counts`` those whose rows in a non-NULL cell are counted
    (``COUNT(col)``): a SUM or AVG grouped by scattered cells is read from them."""
    exprs = []
    for name in attrs:
        attr = table.attribute(name)
        if attr is None:
            raise KeyError(name)
        exprs.append(f"{cell_expr(attr)} AS {quote_ident(attr.name)}")
    terms = []
    for name in sums:
        attr = table.attribute(name)
        if attr is None:
            raise KeyError(name)
        terms.append(attr.domain.weight_sql(quote_ident(attr.name)))
    for name in counts:
        attr = table.attribute(name)
        if attr is None:
            raise KeyError(name)
        terms.append(f"CASE WHEN {cell_expr(attr)} IS NULL THEN NULL ELSE 1 END")  # SUM of it: COUNT(cell)
    groups = ", ".join(str(i + 1) for i in range(len(attrs)))
    if partial_by is None:
        aggs = "count(*)" + "".join(f", COALESCE(SUM({w}), 0)::float8" for w in terms)
        if not attrs:
            return f"SELECT {aggs} FROM {table_ref(table)}"
        return f"SELECT {', '.join(exprs)}, {aggs} FROM {table_ref(table)} GROUP BY {groups}"
    inner = (f"SELECT {''.join(e + ', ' for e in exprs)}count(*) AS n"
             f"{''.join(f', SUM({w}) AS s{i}' for i, w in enumerate(terms))} FROM {table_ref(table)} "
             f"GROUP BY {''.join(g + ', ' for g in groups.split(', ') if g)}{partial_by}")
    names = "".join(quote_ident(a) + ", " for a in attrs)
    tail = f" GROUP BY {groups}" if attrs else ""
    outer = "".join(f", COALESCE(SUM(s{i}), 0)::float8" for i in range(len(terms)))
    return f"SELECT {names}COALESCE(SUM(n), 0)::bigint{outer} FROM ({inner}) AS partials{tail}"
