"""PostgreSQL error fields and SQLSTATE names for the whole product.

``SqlError`` is the one base class of every error that reaches a client as an ErrorResponse (parser
refusals, engine and ledger errors, service and regression refusals, protocol violations). It lives in
``parser`` because that is the package every other one imports; the names below follow PostgreSQL's
errcodes (Appendix A of its manual).
"""

from __future__ import annotations

# Class 08: connection exception
PROTOCOL_VIOLATION = "08P01"
CONNECTION_FAILURE = "08006"
# Class 0A: feature not supported
FEATURE_NOT_SUPPORTED = "0A000"
# Class 22: data exception
DIVISION_BY_ZERO = "22012"
DATETIME_FIELD_OVERFLOW = "22008"
INVALID_DATETIME_FORMAT = "22007"
INVALID_TEXT_REPRESENTATION = "22P02"
INVALID_PARAMETER_VALUE = "22023"
SUBSTRING_ERROR = "22011"
INVALID_ESCAPE_SEQUENCE = "22025"
INVALID_ARGUMENT_FOR_LOG = "2201E"
INVALID_ARGUMENT_FOR_POWER = "2201F"
INVALID_ROW_COUNT = "2201W"
INVALID_OFFSET_COUNT = "2201X"
NUMERIC_VALUE_OUT_OF_RANGE = "22003"
# Class 25: invalid transaction state
READ_ONLY = "25006"
IN_FAILED_TRANSACTION = "25P02"
# Class 28: invalid authorization specification
INVALID_AUTHORIZATION = "28000"
INVALID_PASSWORD = "28P01"
# Class 42: syntax error or access rule violation
SYNTAX_ERROR = "42601"
INSUFFICIENT_PRIVILEGE = "42501"
UNDEFINED_COLUMN = "42703"
UNDEFINED_TABLE = "42P01"
UNDEFINED_FUNCTION = "42883"
UNDEFINED_OBJECT = "42704"
UNDEFINED_PARAMETER = "42P02"
GROUPING_ERROR = "42803"
DATATYPE_MISMATCH = "42804"
CANNOT_COERCE = "42846"
AMBIGUOUS_COLUMN = "42702"
AMBIGUOUS_FUNCTION = "42725"
INVALID_COLUMN_REFERENCE = "42P10"
# Class 53: insufficient resources
TOO_MANY_CONNECTIONS = "53300"
CONFIGURATION_LIMIT_EXCEEDED = "53400"  # the privacy budget of the epoch is spent; rate limits
# Class 54: program limit exceeded
PROGRAM_LIMIT_EXCEEDED = "54000"
STATEMENT_TOO_COMPLEX = "54001"
# Class 57: operator intervention
QUERY_CANCELED = "57014"
IDLE_SESSION_TIMEOUT = "57P05"
CANNOT_CONNECT_NOW = "57P03"  # the upstream database is unavailable
# Class 58 and F0, XX
SYSTEM_ERROR = "58000"
CONFIG_FILE_ERROR = "F0000"
INTERNAL_ERROR = "XX000"


class SqlError(Exception):
    """An error with the fields of PostgreSQL's ErrorResponse.

    ``position`` is a 1-based character offset into the statement, as PostgreSQL reports it. A subclass
    may fix its SQLSTATE as a class attribute and pass ``sqlstate=None``.
    """

    sqlstate: str = INTERNAL_ERROR

    def __init__(self, sqlstate: str | None, message: str, *, detail: str | None = None,
                 hint: str | None = None, position: int | None = None, severity: str = "ERROR") -> None:
        super().__init__(message)
        if sqlstate is not None:
            self.sqlstate = sqlstate
        self.message = message
        self.detail = detail
        self.hint = hint
        self.position = position
        self.severity = severity

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.sqlstate!r}, {self.message!r})"
