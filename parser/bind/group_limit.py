"""The GROUP BY limit once the WHERE clause is bound: a template listing more groups than the limit over the
public domain keeps the keys its WHERE does not exclude by its own text, when those are few enough; else
its groups are the ones a partition selection released (at most the limit), or it is refused."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from pgcore import errors as E
from pgcore.errors import Refusal

from ..analysis.template import Template
from ..model.predicate import Pred, Ranges

Restrict = Callable[[Pred, str | tuple[str, ...], Ranges], Pred]
"""A predicate restricted to a group's cells on one dimension (``group_cells.GroupCells.restrict``)."""


def within_limit(t: Template, restrict: Restrict, base: Pred, selected: frozenset[tuple[int, ...]] | None,
                 limit: int) -> Template:
    """``t`` as the binder lists its groups, at most ``limit`` of them.

    A template with more groups than ``limit`` before its WHERE (``too_many``) keeps, on each dimension,
    the keys whose cells meet ``base`` (the WHERE's cells), when at most ``limit`` groups remain: 8,760
    hours by 8 categories filtered to 6 hours lists 48 (Grafana's multi-series time range). The keys dropped
    are those whose groups the binder omits anyway, as known zeros: the answer is the one listing them all
    would give. Otherwise a template whose groups a partition selection picks (``select_groups``) stays as
    it is, refused only when the selection released more than ``limit``; any other raises ``too_many``."""
    if t.too_many is not None:
        dims = []
        n = 1
        for d in t.groups:
            name: str | tuple[str, ...] = d.attrs or d.attr
            kept = [i for i, cells in enumerate(d.cells) if restrict(base, name, cells) is not False]
            dims.append(replace(d, keys=tuple(d.keys[i] for i in kept), cells=tuple(d.cells[i] for i in kept)))
            n *= len(kept)
        if n <= limit:
            return replace(t, groups=tuple(dims), select_groups=False, too_many=None)
        if not t.select_groups:
            message, hint, position = t.too_many
            raise Refusal(E.PROGRAM_LIMIT_EXCEEDED, message, hint=hint, position=position)
    if t.select_groups and selected is not None and len(selected) > limit:
        raise Refusal(E.PROGRAM_LIMIT_EXCEEDED, f"GROUP BY {', '.join(t.group_attrs)}: DP partition selection "
                      f"released {len(selected)} groups, more than the limit of {limit}",
                      hint="Filter with WHERE, or group by fewer columns.")
    return t
