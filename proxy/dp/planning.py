"""The DP service's planners: one over the engine's current catalog, one per partition selection of keys.

An epoch fixes its ``values_from`` lists, so a new epoch may bring new text domains: ``follow`` swaps in a
planner (with fresh caches) over the engine's catalog. Statements already planned finish on the old one;
the engine refuses a plan whose lists are not its epoch's (StalePlan), and the service plans it again.
A selection of private keys makes a catalog of its own (the column's domain is the released keys), whose
planner is kept per selection: a selection is fixed for its epoch, so its planner's caches stay valid.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

from lapras.ledger.base import PartitionRecord
from parser.bind.partition import PartitionRequest, selected_catalog, selected_table
from parser.model.schema import Catalog
from parser.plan.queryplan import QueryPlan
from parser.planner import Planner, Selection

log = logging.getLogger("lapras.service")

MAX_SELECTED_PLANNERS = 256


class Planners:
    """The current planner (``planner``, over ``catalog``) and the selected-keys planners."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self.planner = Planner(catalog)  # owns the parse and plan caches
        self._selected: dict[str, Planner] = {}
        self._lock = threading.Lock()

    def follow(self, catalog: Catalog | None) -> None:
        """Plan over ``catalog`` (the engine's, which an epoch may change) from now on."""
        if catalog is None or catalog is self.catalog:
            return
        with self._lock:
            if catalog is not self.catalog:
                self.planner = Planner(catalog)
                self._selected = {}  # selected-keys planners were built over the old catalog
                self.catalog = catalog
                log.info("the epoch's value lists changed: planning over its catalog")

    def complete(self, planner: Planner, step: Selection, selection: PartitionRecord, sql: str,
                 params: Sequence[object | None], deadline: float, declared: Sequence[int] = ()) -> QueryPlan:
        """The plan of ``step`` (met by ``planner``) over the keys ``selection`` released: a value list is
        bound from the step's template; private keys are planned over the catalog of the selected keys."""
        request = step.request
        if request.kind == "cells":
            cells = frozenset(tuple(int(i) for i in k) for k in selection.keys)
            return planner.complete(step, cells, deadline=deadline)
        return self._selected_planner(request, selection).plan(sql, params or None, deadline=deadline,
                                                                declared=declared)

    def _selected_planner(self, request: PartitionRequest, selection: PartitionRecord) -> Planner:
        """The planner over the catalog in which the request's column has the selected keys as its domain."""
        ident = f"{request.key}|{selection.cost.to_json()}|{len(selection.keys)}"
        with self._lock:
            planner = self._selected.get(ident)
            if planner is None:
                base = self.catalog.table(request.table, request.schema)
                assert base is not None
                table = selected_table(base, request.columns, selection.keys)
                planner = Planner(selected_catalog(self.catalog, table), cache_bytes=4 << 20)
                self._selected[ident] = planner
                while len(self._selected) > MAX_SELECTED_PLANNERS:
                    self._selected.pop(next(iter(self._selected)))
            return planner
