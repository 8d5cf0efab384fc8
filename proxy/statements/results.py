"""Results in wire-ready form: a row description plus DataRow messages, shared by every answer source."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo
from typing import Any

from parser.semantics.zones import session_setting
from pgcore.errors import Refusal
from pgcore.pgtypes import TIMESTAMPTZ

from ..protocol import backend
from ..protocol.backend import Field, data_row_values
from ..protocol.types import encoder


@dataclass(slots=True)
class ResultSet:
    """What a statement produced: `fields` is None for statements without rows (NoData)."""

    fields: list[Field] | None
    rows: list[bytes]                 # complete DataRow messages, encoded in `formats`
    tag: str
    formats: list[int] = field(default_factory=list)
    notices: list[bytes] = field(default_factory=list)   # complete NoticeResponse messages

    def row_description(self) -> bytes:
        return backend.row_description(self.fields or [], self.formats)


def command(tag: str, notices: list[bytes] | None = None) -> ResultSet:
    """A result without rows."""
    return ResultSet(None, [], tag, [], notices or [])


def format_for(formats: Sequence[int], i: int) -> int:
    """The format code of column i under the protocol's 0/1/N convention."""
    n = len(formats)
    return 0 if n == 0 else formats[0] if n == 1 else formats[i]


def session_zone(name: str | None) -> tzinfo:
    """The session's TimeZone setting as a zone, read as PostgreSQL reads it (``zones.session_setting``: SET
    checks it there first); UTC when unset or not one (a start-up packet's value is not checked)."""
    if not name:
        return UTC
    try:
        return session_setting(name).tzinfo()
    except Refusal:
        return UTC


def rezoned(fields: Sequence[Field] | None, rows: list[bytes], formats: Sequence[int], zone: tzinfo) -> list[bytes]:
    """Relayed DataRows with their text timestamptz values printed in ``zone`` (the session's TimeZone; the
    catalog database's backends print UTC); a value Python does not read (infinity, BC) is left as it is."""
    if zone is UTC or not fields:
        return rows
    cols = [i for i, f in enumerate(fields) if f[3] == TIMESTAMPTZ and format_for(formats, i) == 0]
    if not cols:
        return rows
    enc = encoder(TIMESTAMPTZ, 0)
    out = []
    for raw in rows:
        values = data_row_values(raw)
        for i in cols:
            v = values[i]
            if v is not None:
                try:
                    values[i] = enc(datetime.fromisoformat(v.decode()).astimezone(zone))
                except ValueError:
                    pass
        out.append(backend.data_row(values))
    return out


def encode_rows(fields: Sequence[Field], rows: Sequence[Sequence[Any]], formats: Sequence[int],
                zone: tzinfo = UTC) -> list[bytes]:
    """Encode Python rows into DataRow messages in the requested formats; timestamptz values print in
    ``zone`` (the session's TimeZone), as PostgreSQL prints them."""
    encs = [encoder(f[3], format_for(formats, i)) for i, f in enumerate(fields)]
    if zone is not UTC and any(f[3] == TIMESTAMPTZ for f in fields):
        tz_cols = [i for i, f in enumerate(fields) if f[3] == TIMESTAMPTZ]
        rows = [tuple(v.astimezone(zone) if i in tz_cols and isinstance(v, datetime) else v
                      for i, v in enumerate(row)) for row in rows]
    out = []
    data_row = backend.data_row
    for row in rows:
        out.append(data_row([None if v is None else enc(v) for enc, v in zip(encs, row, strict=True)]))
    return out


def text_result(columns: Sequence[tuple[str, int]], rows: Sequence[Sequence[Any]], tag: str,
                formats: Sequence[int] = ()) -> ResultSet:
    """A result computed by the proxy itself (SHOW, version, ...)."""
    fields = [backend.field(name, oid) for name, oid in columns]
    return ResultSet(fields, encode_rows(fields, rows, formats), tag, list(formats))
