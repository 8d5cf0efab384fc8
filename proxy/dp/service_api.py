"""The interface between the wire protocol and the differentially private answering service."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from .commands import DPCommand


@dataclass(frozen=True, slots=True)
class ColumnDesc:
    name: str
    type_oid: int


@dataclass(slots=True)
class QueryResult:
    columns: list[ColumnDesc]
    rows: list[tuple[Any, ...]]
    command_tag: str
    notices: list[str] = field(default_factory=list)
    # Provenance for the query log and metrics (never a value): engine outcome, canonical keys, spend.
    outcome: str | None = None
    query_keys: tuple[str, ...] = ()
    cost: dict[str, float] | None = None


class QueryService(Protocol):
    """Answers statements that read protected tables (or call lapras.* functions / SHOW lapras.*), each
    handed over by the router as a typed command (``proxy.dp.commands``).

    Exceptions carry PostgreSQL fields: `sqlstate`, `message`, and optionally `detail`, `hint`, `position`.
    """

    def describe(self, command: DPCommand, param_oids: Sequence[int],
                 settings: Mapping[str, str] | None = None) -> tuple[list[int], list[ColumnDesc]]:
        """Parameter type oids and result columns, from the SQL and the session's settings (its TimeZone);
        never spends budget."""
        ...

    async def execute(self, command: DPCommand, params: Sequence[object | None], user: str,
                      settings: Mapping[str, str], param_oids: Sequence[int] = ()) -> QueryResult:
        """Run the statement with bound parameters and return its (noisy) result; ``param_oids``: the types
        the client declared for them (Parse), which type parameters inside expressions."""
        ...
