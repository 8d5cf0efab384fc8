"""The parser's exception: a refusal carrying PostgreSQL ErrorResponse fields."""

from __future__ import annotations


class Refusal(Exception):
    """A statement the parser will not turn into linear queries, with the SQLSTATE the client sees.

    ``position`` is a 1-based character offset into the SQL text, as in PostgreSQL's ErrorResponse 'P'.
    """

    def __init__(
        self,
        sqlstate: str,
        message: str,
        *,
        detail: str | None = None,
        hint: str | None = None,
        position: int | None = None,
    ) -> None:
        super().__init__(message)
        self.sqlstate = sqlstate
        self.message = message
        self.detail = detail
        self.hint = hint
        self.position = position

    def __repr__(self) -> str:
        return f"Refusal({self.sqlstate!r}, {self.message!r})"


SYNTAX_ERROR = "42601"
INSUFFICIENT_PRIVILEGE = "42501"
FEATURE_NOT_SUPPORTED = "0A000"
UNDEFINED_COLUMN = "42703"
UNDEFINED_TABLE = "42P01"
UNDEFINED_FUNCTION = "42883"
GROUPING_ERROR = "42803"
INVALID_TEXT_REPRESENTATION = "22P02"
DATATYPE_MISMATCH = "42804"
PROGRAM_LIMIT_EXCEEDED = "54000"
UNDEFINED_PARAMETER = "42P02"
PROTOCOL_VIOLATION = "08P01"
AMBIGUOUS_COLUMN = "42702"
INVALID_ROW_COUNT = "2201W"
INVALID_OFFSET_COUNT = "2201X"
INVALID_COLUMN_REFERENCE = "42P10"
READ_ONLY = "25006"
STATEMENT_TOO_COMPLEX = "54001"
QUERY_CANCELED = "57014"
DIVISION_BY_ZERO = "22012"

SUPPORTED_HINT = (
    "Supported: SELECT of COUNT(*), COUNT(col), SUM(col), AVG(col) (also FILTER and CASE WHEN forms) and "
    "arithmetic between them, over one protected table, with WHERE comparisons of attributes to literals or "
    "parameters, GROUP BY attributes or one-attribute buckets, HAVING, ORDER BY, LIMIT/OFFSET."
)
