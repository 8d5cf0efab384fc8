"""The SQL of one attribute's cells: the cell a stored value falls in, a set of cells as a condition (on the
stored column where its type says that is exact), and the values COUNT(DISTINCT) counts. The pushed-down
statements (``sql``), the per-unit bounding (``bounding``) and the row filters (``rowfilter``) all write
cells through here."""

from __future__ import annotations

from pgcore.identifiers import quote_ident

from ..model.predicate import Ranges
from ..model.schema import Attribute


def cell_expr(attr: Attribute) -> str:
    """SQL mapping the stored column to its domain cell value (clipped / folded; NULL stays NULL if nullable)."""
    return attr.domain.cell_sql(quote_ident(attr.name))


def counted_expr(attr: Attribute) -> str:
    """SQL of the values COUNT(DISTINCT attr) counts: the attribute's cell value where each cell holds one
    stored value (``distinct_cells``; a stored value outside the declared list is read as the cell the domain
    puts it in, as every other aggregate reads it), so a unit can add only values the domain lists
    (``parser.bind.distinct_caps``); else the stored values. A NULL stays NULL (never counted)."""
    col = quote_ident(attr.name)
    if not attr.domain.distinct_cells:
        return col
    return f"CASE WHEN {col} IS NULL THEN NULL ELSE {cell_expr(attr)} END"


def attr_condition(attr: Attribute, ranges: Ranges) -> str:
    """The attribute's cells ``ranges`` as a condition on its cell expression (NULL's cell: IS NULL)."""
    e = cell_expr(attr)
    d = attr.domain
    conds: list[str] = []
    listed: list[str] = []
    for lo, hi in ranges:
        top = hi
        if d.null_index is not None and hi == d.null_index:
            conds.append(f"{e} IS NULL")
            top = hi - 1
        if top < lo:
            continue
        cond = d.range_sql(e, lo, top) if lo < top else None
        if cond is not None:
            conds.append(cond)
        else:
            listed.extend(d.literal_sql(d.value_at(i)) for i in range(lo, top + 1))
    if len(listed) == 1:
        conds.insert(0, f"{e} = {listed[0]}")
    elif listed:
        conds.insert(0, f"{e} IN ({', '.join(listed)})")
    return conds[0] if len(conds) == 1 else "(" + " OR ".join(conds) + ")"


def attr_sql(attr: Attribute, ranges: Ranges, cells_only: bool = False) -> str:
    """The attribute's cells as a condition: on the stored column where its type says that is exact
    (``ColumnType.raw_exact``), else on the cell expression."""
    if not cells_only and attr.domain.raw_exact:
        raw = attr.domain.raw_sql(quote_ident(attr.name), ranges)
        if raw is not None:
            return raw
    return attr_condition(attr, ranges)
