"""Work limits of planning one statement: its size, its IN lists, its nesting, its decision-diagram work,
its boxes, and a deadline (the session's statement timeout), so no text, however written, holds a worker.

A statement over a limit is refused with 54000 (program limit exceeded) and a hint; one that runs past
its deadline with 57014, as PostgreSQL cancels a statement at its ``statement_timeout``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime

from pgcore import errors as E
from pgcore.errors import Refusal

DEFAULT_MAX_GROUPS = 10_000


@dataclass(frozen=True)
class Limits:
    """Bounds on one statement's planning work (deterministic: the same text is refused the same way)."""

    max_sql_bytes: int = 262_144
    """Longer statements over protected tables are refused before sqlglot parses them."""
    max_in_items: int = 10_000
    """Items of one IN list (or ANY(ARRAY[...]))."""
    max_depth: int = 200
    """Nesting of conditions and expressions."""
    max_steps: int = 1_000_000
    """Decision-diagram operations (node merges) of one statement."""
    max_boxes: int = 4_096
    """Disjoint boxes of one linear query (the canonical form the engine and the generated SQL read)."""
    max_total_boxes: int = 200_000
    """Boxes of all the linear queries of one statement."""
    max_groups: int = DEFAULT_MAX_GROUPS
    """Groups of a GROUP BY over the public domain."""


def too_complex(what: str, hint: str) -> Refusal:
    return Refusal(E.PROGRAM_LIMIT_EXCEEDED, f"statement too complex: {what}", hint=hint)


def timed_out() -> Refusal:
    return Refusal(E.QUERY_CANCELED, "canceling statement due to statement timeout",
                   hint="Planning this statement took longer than statement_timeout; simplify its WHERE clause.")


class Budget:
    """One statement's planning budget: counts work against ``limits`` and watches the deadline.

    ``deadline`` is a ``time.monotonic()`` instant (None: no deadline). The clock is read every few
    steps only, so counting stays cheap on the hot path.
    """

    __slots__ = ("limits", "deadline", "steps", "boxes", "next_check", "now")

    _EVERY = 256

    def __init__(self, limits: Limits, deadline: float | None = None) -> None:
        self.limits = limits
        self.deadline = deadline
        self.steps = 0
        self.boxes = 0
        self.next_check = self._EVERY
        self.now: datetime | None = None

    def statement_time(self) -> datetime:
        """The statement's one instant (UTC) for now(), current_date...: read once, the same for every call.
        A statement that reads it is planned anew each time (its template depends on the day)."""
        if self.now is None:
            self.now = datetime.now(UTC)
        return self.now

    def check_deadline(self) -> None:
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise timed_out()

    def tick(self, n: int = 1) -> None:
        """Account ``n`` units of work (decision-diagram merges, lowered nodes, evaluated cells)."""
        self.steps += n
        if self.steps >= self.next_check:
            self.checkpoint()

    def checkpoint(self) -> None:
        """Check the step limit and the deadline (hot loops inline ``tick`` and call this when due)."""
        self.next_check = self.steps + self._EVERY
        if self.steps > self.limits.max_steps:
            raise too_complex(f"more than {self.limits.max_steps} planning steps",
                              "Split the statement, or write its WHERE clause with fewer alternatives.")
        self.check_deadline()

    def add_boxes(self, n: int) -> None:
        """Account one linear query of ``n`` disjoint boxes."""
        if n > self.limits.max_boxes:
            raise too_complex(f"one aggregate's condition splits into {n} disjoint boxes, more than "
                              f"{self.limits.max_boxes}",
                              "Conditions that couple many attributes (ORs across AND groups) multiply the "
                              "boxes; group by an attribute or split the statement instead.")
        self.boxes += n
        if self.boxes > self.limits.max_total_boxes:
            raise too_complex(f"more than {self.limits.max_total_boxes} disjoint boxes in all",
                              "Group by fewer attributes or simplify the WHERE clause.")

    def in_list(self, n: int) -> None:
        if n > self.limits.max_in_items:
            raise too_complex(f"an IN list of {n} items, more than {self.limits.max_in_items}",
                              "Split the IN list over several statements, or filter on a range.")

    def depth(self, d: int) -> None:
        if d > self.limits.max_depth:
            raise Refusal(E.STATEMENT_TOO_COMPLEX, "statement too complex",
                          hint=f"Nest conditions and expressions at most {self.limits.max_depth} deep.")
