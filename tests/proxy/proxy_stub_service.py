"""A small in-test QueryService: fixed answers, the result shape from the SQL text alone."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping, Sequence

from proxy.dp.commands import DPCommand
from proxy.dp.service_api import ColumnDesc, QueryResult
from proxy.protocol.errors import PgError

INT8, FLOAT8, TEXT = 20, 701, 25


class StubService:
    """Answers COUNT/AVG/GROUP BY over adult with fixed numbers; refuses row-level reads with 42501."""

    def __init__(self) -> None:
        self.executed: list[tuple[str, list[object | None]]] = []
        self.described = 0

    def _shape(self, sql: str) -> list[ColumnDesc]:
        low = sql.lower()
        if "count(" not in low and "avg(" not in low and "sum(" not in low and "lapras." not in low:
            raise PgError("42501", "only aggregate queries over a protected table are allowed",
                          hint="use COUNT, SUM or AVG")
        cols = []
        if "group by" in low:
            m = re.search(r"group\s+by\s+(\w+)", low)
            cols.append(ColumnDesc(m.group(1) if m else "key", INT8))
        if "avg(" in low:
            cols.append(ColumnDesc("avg", FLOAT8))
        else:
            cols.append(ColumnDesc("count", INT8))
        return cols

    def describe(self, command: DPCommand, param_oids: Sequence[int]) -> tuple[list[int], list[ColumnDesc]]:
        sql = command.sql
        self.described += 1
        n = max((int(x) for x in re.findall(r"\$(\d+)", sql)), default=0)
        oids = [param_oids[i] if i < len(param_oids) and param_oids[i] else INT8 for i in range(n)]
        return oids, self._shape(sql)

    async def execute(self, command: DPCommand, params: Sequence[object | None], user: str,
                      settings: Mapping[str, str]) -> QueryResult:
        sql = command.sql
        if "slow_dp" in sql:
            await asyncio.sleep(10)
        cols = self._shape(sql)
        self.executed.append((sql, list(params)))
        if len(cols) == 2:
            rows = [(0, 100.5 if cols[1].type_oid == FLOAT8 else 100), (1, 200.25 if cols[1].type_oid == FLOAT8
                                                                         else 200)]
        else:
            rows = [(38.5,)] if cols[0].type_oid == FLOAT8 else [(48842,)]
        notices = ["stderr 1.5"] if settings.get("lapras.show_stderr") == "on" else []
        return QueryResult(cols, rows, f"SELECT {len(rows)}", notices)
