"""LinearQuery: one canonical linear query over a protected table's domain histogram."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np

from pgcore.identifiers import display_ident, qualified

from .predicate import Pred, Ranges, Space
from .schema import Domain, TableSchema

_MAX_KEY = 2600  # bytes of a query key written out; past them its cell conditions become a digest

Box = tuple[tuple[str, Ranges], ...]
"""One product of per-attribute index sets: (attribute, index ranges) for each constrained attribute."""


@dataclass(frozen=True)
class LinearQuery:
    """The vector ``scale * w(value) * 1[cell in union of boxes]`` over the marginal ``marginal``.

    Fields are canonical: two queries compare (and hash) equal iff their vectors are equal. ``boxes`` are
    pairwise disjoint; an attribute of the marginal missing from a box is unconstrained in it. ``value``
    is the SUM attribute (weight of a cell = the attribute's value; NULL weighs 0) or None for a count;
    ``scale`` multiplies every weight (``SUM(x)`` restricted to one value ``c`` of ``x`` is ``c * COUNT``).
    """

    table: str
    schema: str
    marginal: tuple[str, ...]
    boxes: tuple[Box, ...]
    value: str | None = None
    scale: float = 1.0
    measure: bool = False  # ``value`` is a measure: each row adds its own clamped value (no histogram form)
    sensitivity: float = field(default=1.0, compare=False)
    key: str = field(default="", compare=False)
    source: TableSchema | None = field(default=None, compare=False, repr=False)
    """The derived table the vector is over (``parser.bind.distinct``: units or distinct values present per
    group), named by ``table``; None: the protected table itself."""
    # Per-cell weights of ``value`` when a per-row expression computes them (``SUM(s * s)``), one per cell
    # of the attribute's domain; None: the attribute's own values (``domain.numeric_weights()``).
    weights: tuple[float, ...] | None = None
    # SUM of a per-row expression over measures (parser/analysis/measure_expr.py): its SQL over the clamped
    # columns, evaluated by the database; ``weights`` are then its bound in each cell of ``value``.
    expr: str | None = None

    @property
    def is_zero(self) -> bool:
        """True when the vector is identically zero: its answer is exactly 0 and costs no budget."""
        return not self.boxes

    @property
    def kind(self) -> str:
        return "zero" if self.is_zero else ("sum" if self.value else "count")

    def factors(self, table: TableSchema) -> list[tuple[float, list[np.ndarray]]]:
        """Kronecker form: the vector is sum of ``w * kron(vs[0], vs[1], ...)`` in marginal order."""
        out: list[tuple[float, list[np.ndarray]]] = []
        for box in self.boxes:
            constrained = dict(box)
            vecs: list[np.ndarray] = []
            for attr in self.marginal:
                domain = _domain(table, attr)
                v = np.zeros(domain.size) if attr in constrained else np.ones(domain.size)
                for lo, hi in constrained.get(attr, ()):
                    v[lo : hi + 1] = 1.0
                if attr == self.value:
                    v = v * value_weights(table, self.value, self.weights)
                vecs.append(v)
            out.append((float(self.scale), vecs))
        return out

    def vector(self, table: TableSchema) -> np.ndarray:
        """Dense weights over the marginal only (C order, axes in ``marginal`` order)."""
        vec = np.zeros(table.shape(self.marginal))
        for w, vecs in self.factors(table):
            term = np.asarray(w, dtype=np.float64)
            for v in vecs:
                term = np.multiply.outer(term, v)
            vec += term
        return vec

    def answer(self, table: TableSchema, histogram: np.ndarray) -> float:
        """Exact answer on a dense marginal histogram over ``self.marginal`` (for tests and simulations)."""
        if self.is_zero:
            return 0.0
        if self.measure:
            raise ValueError(f"{self.key}: a SUM over a measure has no histogram form; its exact answer is "
                             "computed by the database (parser.pushdown.sql.answers_sql)")
        total = 0.0
        for w, vecs in self.factors(table):
            acc = histogram
            for v in reversed(vecs):
                acc = acc @ v
            total += w * float(acc)
        return total

    def __repr__(self) -> str:
        return f"LinearQuery({self.key})"


def space_of(table: TableSchema) -> Space:
    """The predicate space of a table: its attributes in sorted order (the canonical order)."""
    names = sorted(a.name for a in table.attributes)
    return Space(names, [table.shape((n,))[0] for n in names])


def _domain(table: TableSchema, attr: str) -> Domain:
    a = table.attribute(attr)
    assert a is not None, attr
    return a.domain


def value_weights(table: TableSchema, value: str, weights: tuple[float, ...] | None) -> np.ndarray:
    """Per-cell weights of a SUM over ``value``: the explicit ``weights`` of a per-row expression, or the
    attribute's own values (NULL cells weigh 0)."""
    if weights is not None:
        return np.asarray(weights, dtype=np.float64)
    return _domain(table, value).numeric_weights()


def _weight_of(w: np.ndarray, index: int) -> float:
    return float(w[index])


def _proportional(table: TableSchema, value: str, w: np.ndarray) -> float | None:
    """``c`` when the explicit weights are ``c`` times the attribute's own values on every cell (``SUM(n * 2)``
    is ``2 * SUM(n)``: one query, one key), else None."""
    dom = _domain(table, value)
    if not dom.summable or dom.measure:
        return None
    own = dom.numeric_weights()
    live = np.flatnonzero(w)
    if not len(live) or not np.all(own[live]):
        return None
    ratios = w[live] / own[live]
    c = float(ratios[0])
    return c if np.all(ratios == c) and np.all(w[own == 0] == 0) else None


def make_linear_query(
    table: TableSchema, space: Space, pred: Pred, value: str | None = None, scale: float = 1.0,
    weights: tuple[float, ...] | None = None, expr: str | None = None,
) -> LinearQuery:
    """Canonicalise ``scale * SUM(value) FILTER (pred)`` (a count when ``value`` is None).

    ``weights`` (one per cell of ``value``) replace the attribute's values when a per-row expression
    computes them; weights proportional to the values become a scale (``SUM(n * 2)`` is ``2 * SUM(n)``).
    For a measure (``numeric`` / ``float``) each row adds its own clamped value: the vector's weights are
    the largest a row can add in each cell (what sensitivities read), not its exact weights."""
    measure = value is not None and ((_domain(table, value).measure and weights is None) or expr is not None)
    if value is not None and weights is not None and expr is None:
        c = _proportional(table, value, np.asarray(weights, dtype=np.float64))
        if c is not None:
            weights, scale = None, scale * c
    if measure and expr is None:
        assert value is not None
        dom = _domain(table, value)
        pred = space.and_(pred, space.cells(value, [(0, dom.base_size - 1)]))  # NULL adds nothing
    elif value is not None:
        w = value_weights(table, value, weights)
        # Cells weighing 0 contribute nothing: drop them so equal vectors get equal predicates. As runs of
        # nonzero cells, not one range per cell (a 3,601-value column cost ~60 ms per statement so).
        nz = np.flatnonzero(w)
        cut = np.flatnonzero(np.diff(nz) > 1)
        starts, ends = np.append(nz[:1], nz[cut + 1]), np.append(nz[cut], nz[-1:])
        pred = space.and_(pred, space.cells(value, list(zip(starts.tolist(), ends.tolist(), strict=True))))
    if scale == 0 or pred is False:
        return _zero(table)
    level_boxes = list(space.boxes(pred))
    if value is not None and not measure:
        value, scale, weights = _canonical_value(table, space, level_boxes, value, scale, weights)
    support = space.support(pred, level_boxes)
    marginal = tuple(sorted(set(support) | ({value} if value else set())))
    boxes = tuple(tuple((space.attrs[lv], rs) for lv, rs in sorted(b.items())) for b in level_boxes)
    sens = abs(scale)
    if value is not None:
        dom = _domain(table, value)
        full: Ranges = ((0, dom.size - 1),)
        sens *= max(_abs_max(table, value, weights, rs) for rs in {dict(b).get(value, full) for b in boxes})
    q = LinearQuery(table.name, table.schema, marginal, boxes, value, float(scale), measure, sens, weights=weights,
                    expr=expr)
    object.__setattr__(q, "key", _key(table, q))
    return q


def _abs_max(table: TableSchema, value: str, weights: tuple[float, ...] | None, rs: Ranges) -> float:
    """The largest absolute weight of ``value`` over the cells ``rs``; cached on the domain for its own
    values (every group of a GROUP BY asks it again)."""
    if weights is not None:
        w = np.abs(value_weights(table, value, weights))
        return max(float(np.max(w[lo:hi + 1])) for lo, hi in rs)
    dom = _domain(table, value)
    cache: dict[Ranges, float] | None = dom.__dict__.get("_abs_max")
    if cache is None or len(cache) > 10_000:
        cache = {}
        object.__setattr__(dom, "_abs_max", cache)  # not a field: equality and hashing ignore it
    hit = cache.get(rs)
    if hit is None:
        w = np.abs(dom.numeric_weights())
        hit = cache[rs] = max(float(np.max(w[lo:hi + 1])) for lo, hi in rs)
    return hit


def unit(q: LinearQuery) -> tuple[LinearQuery, float]:
    """Split a scaled count ``c * COUNT`` into (COUNT, c): the engine measures the count once and the
    factor is applied to its noisy answer (post-processing; same accuracy as measuring the scaled query)."""
    if q.value is not None or q.scale == 1 or q.is_zero:
        return q, 1.0
    u = LinearQuery(q.table, q.schema, q.marginal, q.boxes, None, 1.0, sensitivity=1.0)
    prefix = qualified(q.schema, q.table)  # the weight follows the table's name, which may hold any text
    rest = q.key[len(prefix):].replace(f"|count*{_fmt_scale(q.scale)}|", "|count|", 1)
    object.__setattr__(u, "key", prefix + rest)
    return u, q.scale


def _canonical_value(
    table: TableSchema, space: Space, boxes: list[dict[int, Ranges]], value: str, scale: float,
    weights: tuple[float, ...] | None = None,
) -> tuple[str | None, float, tuple[float, ...] | None]:
    """Pick the unique representation of a SUM whose weights the predicate pins down.

    If the SUM attribute takes one value ``c`` on every cell of the support, the query is ``c * COUNT``.
    If another integer attribute equals the SUM attribute on every cell (both pinned to equal values box
    by box), the vectors coincide: the alphabetically first attribute names the query.
    """
    lv = space.level_of[value]
    dom = _domain(table, value)
    w = value_weights(table, value, weights)
    pinned: list[float] = []
    for b in boxes:
        rs = b.get(lv, ((0, dom.size - 1),))
        if len(rs) != 1 or rs[0][0] != rs[0][1]:
            return value, scale, weights
        pinned.append(_weight_of(w, rs[0][0]))
    if len(set(pinned)) == 1:
        return None, scale * pinned[0], None
    if weights is not None:
        return value, scale, weights
    candidates = [value]
    for other in space.attrs:
        if other == value:
            continue
        odom = _domain(table, other)
        if not odom.summable:
            continue
        olv = space.level_of[other]
        ok = True
        for b, wv in zip(boxes, pinned, strict=True):
            rs = b.get(olv, ((0, odom.size - 1),))
            if len(rs) != 1 or rs[0][0] != rs[0][1] or _weight_of(odom.numeric_weights(), rs[0][0]) != wv:
                ok = False
                break
        if ok:
            candidates.append(other)
    return min(candidates), scale, None


def _zero(table: TableSchema) -> LinearQuery:
    q = LinearQuery(table.name, table.schema, (), (), None, 1.0, sensitivity=0.0)
    object.__setattr__(q, "key", f"{table.qualified_name}|zero")
    return q


def _fmt_scale(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def _key(table: TableSchema, q: LinearQuery) -> str:
    """Canonical text: stable across processes; written with domain values, not indices. Names are
    written as SQL shows them (``display_ident``): plain ones bare, so keys of plain names never change,
    odd ones quoted, so a key reads one way only (column ``"a.b"`` is not table ``a`` column ``b``)."""
    if q.value is None:
        weight = "count" if q.scale == 1 else f"count*{_fmt_scale(q.scale)}"
    else:
        value = display_ident(q.value)
        if q.expr is not None:  # an expression over measures: named by the digest of its SQL and bounds
            data = q.expr.encode() + np.asarray(q.weights, dtype="<f8").tobytes()
            value = f"{value}~e{hashlib.blake2b(data, digest_size=8).hexdigest()}"
        elif q.weights is not None:  # a per-row expression's weights: named by their digest (stable, short)
            digest = hashlib.blake2b(np.asarray(q.weights, dtype="<f8").tobytes(), digest_size=8).hexdigest()
            value = f"{value}~w{digest}"
        weight = f"sum({value})" if q.scale == 1 else f"sum({value})*{_fmt_scale(q.scale)}"
    parts = []
    for box in q.boxes:
        if not box:
            parts.append("all")
            continue
        conds = []
        for attr, rs in box:
            dom = _domain(table, attr)  # a split axis (parser/bind/splits.py) is named by its column: ``ts~cut``
            conds.append(f"{getattr(dom, 'key_label', None) or display_ident(attr)}={dom.format_ranges(rs)}")
        parts.append("&".join(conds))
    body = "|".join(parts)
    head = f"{table.qualified_name}|{weight}|"
    if 4 * (len(head) + len(body)) > _MAX_KEY and len((head + body).encode()) > _MAX_KEY:  # UTF-8: <= 4 a char
        # The ledger indexes keys (a btree entry holds at most about 2,700 bytes): a long cell list (an IN
        # list of 10,000 values) is named by the digest of its canonical text, as stable as the text itself.
        body = "#" + hashlib.blake2b(body.encode(), digest_size=16).hexdigest()
    return head + body
