"""The typed commands the router hands the DP service: one per kind of statement it answers.

The router reads a statement once (its kind, and for a query its sqlglot trees from
``parser.syntax.parse.parse_statements``) and the service dispatches on the command's type: no statement is
classified twice. A command is cached with its route, so it is immutable; its trees are not (the planner's
analysis rewrites them), hence ``Parsed``: the trees are handed to the first planning and to nothing after.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from sqlglot import exp

Trees = tuple[exp.Expr, ...]


class Parsed:
    """The trees of one statement's text, given to one planning only (``take``); later ones parse the text,
    which the planner's template cache makes rare."""

    __slots__ = ("_lock", "_trees")

    def __init__(self, trees: Trees | None) -> None:
        self._trees = trees
        self._lock = threading.Lock()

    def take(self) -> Trees | None:
        with self._lock:
            trees, self._trees = self._trees, None
            return trees

    def __repr__(self) -> str:
        return f"Parsed({'held' if self._trees is not None else 'taken'})"


NOT_PARSED = Parsed(None)


@dataclass(frozen=True, slots=True)
class QueryCommand:
    """An aggregate statement over protected tables (planned, then answered by the engine)."""

    sql: str
    parsed: Parsed = field(default=NOT_PARSED, compare=False)


@dataclass(frozen=True, slots=True)
class ExplainCommand:
    """``EXPLAIN <query>`` of such a statement: what it measures and costs (``statement`` is the query)."""

    sql: str
    statement: str
    parsed: Parsed = field(default=NOT_PARSED, compare=False)


@dataclass(frozen=True, slots=True)
class ShowCommand:
    """``SHOW lapras.<target>`` (``lapras.budget``; other names are refused with 42704)."""

    sql: str
    target: str


@dataclass(frozen=True, slots=True)
class NewEpochCommand:
    """``SELECT lapras.new_epoch()``: an admin starts the next epoch."""

    sql: str


@dataclass(frozen=True, slots=True)
class RegressionCommand:
    """A statement naming ``lapras.linear_regression``: the regression endpoint answers it if it is a call
    (``lapras.regression.sqlcall`` reads the call), else it is a query."""

    sql: str
    parsed: Parsed = field(default=NOT_PARSED, compare=False)


DPCommand = QueryCommand | ExplainCommand | ShowCommand | NewEpochCommand | RegressionCommand
