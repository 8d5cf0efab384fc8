"""The parser's exception: a refusal carrying PostgreSQL ErrorResponse fields."""

from __future__ import annotations

from .sqlstate import (  # noqa: F401 - the parser's SQLSTATE names, re-exported for its passes
    AMBIGUOUS_COLUMN,
    AMBIGUOUS_FUNCTION,
    CANNOT_COERCE,
    DATATYPE_MISMATCH,
    DIVISION_BY_ZERO,
    FEATURE_NOT_SUPPORTED,
    GROUPING_ERROR,
    INSUFFICIENT_PRIVILEGE,
    INVALID_COLUMN_REFERENCE,
    INVALID_OFFSET_COUNT,
    INVALID_ROW_COUNT,
    INVALID_TEXT_REPRESENTATION,
    NUMERIC_VALUE_OUT_OF_RANGE,
    PROGRAM_LIMIT_EXCEEDED,
    PROTOCOL_VIOLATION,
    QUERY_CANCELED,
    READ_ONLY,
    STATEMENT_TOO_COMPLEX,
    SYNTAX_ERROR,
    UNDEFINED_COLUMN,
    UNDEFINED_FUNCTION,
    UNDEFINED_PARAMETER,
    UNDEFINED_TABLE,
    SqlError,
)


class Refusal(SqlError):
    """A statement the parser will not turn into linear queries, with the SQLSTATE the client sees."""


SUPPORTED_HINT = (
    "Supported: SELECT of COUNT(*), COUNT(col), SUM(col), AVG(col) (also FILTER and CASE WHEN forms) and "
    "arithmetic between them, over one protected table, with WHERE comparisons of attributes to literals or "
    "parameters, GROUP BY attributes or one-attribute buckets, HAVING, ORDER BY, LIMIT/OFFSET."
)
