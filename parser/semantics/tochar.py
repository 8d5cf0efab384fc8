"""PostgreSQL's ``to_char(date / timestamp, pattern)``, evaluated in Python over declared cells.

Dashboards group and filter on formatted dates: Tableau's and Power BI's month names (``'Month'``,
``'Mon'``), ``'YYYY-MM'``, day names (``'Day'``, ``'Dy'``), quarters (``'Q'``), ISO weeks (``'IW'``). The
pattern is read as PostgreSQL's formatting.c reads it: at each position the longest template keyword
(case variants as PostgreSQL lists them: ``Month`` capitalised, ``MONTH`` upper, ``month`` lower; the
numeric ones in either case), optionally after ``FM`` (fill mode: no padding) or ``TM`` (translation
mode; the C locale's English names), optionally followed by ``TH`` / ``th`` (ordinal suffix); a
double-quoted string is copied, ``\\"`` is a quote, anything else is copied as is. Names are blank-padded
to 9 characters (``Month``, ``Day``) and numbers zero-padded to their width unless FM, as upstream.
A timestamptz arrives as its wall time in the session's zone (analysis/zoned.py); ``TZ`` / ``OF`` are refused.
Checked against PostgreSQL over every day and hour of a range (tests/parser/test_tochar.py).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, datetime
from functools import lru_cache

from sqlglot.dialects.postgres import Postgres
from sqlglot.time import format_time

_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December")
_DAYS = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")
_ROMAN = ("I", "II", "III", "IV", "V", "VI", "VII", "VIII", "IX", "X", "XI", "XII")

# Keywords in matching order (longest first within a first letter, as formatting.c's table is searched).
_KEYWORDS = (
    "A.D.", "A.M.", "AD", "AM", "B.C.", "BC", "CC", "DAY", "DDD", "DD", "DY", "Day", "Dy", "D",
    "FF1", "FF2", "FF3", "FF4", "FF5", "FF6", "FX", "HH24", "HH12", "HH", "IDDD", "ID", "IW", "IYYY", "IYY",
    "IY", "I", "J", "MI", "MM", "MONTH", "MON", "MS", "Month", "Mon", "OF", "P.M.", "PM", "Q", "RM", "SSSSS",
    "SSSS", "SS", "TZH", "TZM", "TZ", "US", "WW", "W", "Y,YYY", "YYYY", "YYY", "YY", "Y",
    "a.d.", "a.m.", "ad", "am", "b.c.", "bc", "cc", "day", "ddd", "dd", "dy", "d", "ff1", "ff2", "ff3", "ff4",
    "ff5", "ff6", "fx", "hh24", "hh12", "hh", "iddd", "id", "iw", "iyyy", "iyy", "iy", "i", "j", "mi", "mm",
    "month", "mon", "ms", "of", "p.m.", "pm", "q", "rm", "sssss", "ssss", "ss", "tzh", "tzm", "tz", "us", "ww",
    "w", "y,yyy", "yyyy", "yyy", "yy", "y",
)
_ZONES = {"OF", "TZH", "TZM", "TZ", "of", "tzh", "tzm", "tz"}
_NUMERIC_WIDTH = {"CC": 2, "DDD": 3, "DD": 2, "D": 1, "HH24": 2, "HH12": 2, "HH": 2, "IDDD": 3, "ID": 1, "IW": 2,
                  "IYYY": 4, "IYY": 3, "IY": 2, "I": 1, "J": 1, "MI": 2, "MM": 2, "MS": 3, "Q": 1, "SSSSS": 1,
                  "SSSS": 1, "SS": 2, "US": 6, "WW": 2, "W": 1, "YYYY": 4, "YYY": 3, "YY": 2, "Y": 1,
                  **{f"FF{n}": n for n in range(1, 7)}}

Token = tuple[str, str, bool, bool, str]
"""(kind, text, fill mode, translation mode, ordinal suffix): kind "lit" copies text; "kw" formats keyword
``text``."""


class Unsupported(ValueError):
    """A pattern the proxy does not evaluate (time zone fields); the message names the part."""


def pg_pattern(strftime: str) -> str | None:
    """The PostgreSQL pattern sqlglot read into strftime codes, or None when that is not recoverable
    exactly (read back, it must give the same codes)."""
    raw = format_time(strftime, Postgres.INVERSE_TIME_MAPPING, Postgres.INVERSE_TIME_TRIE)
    if raw is None:
        return None
    again = format_time(raw, Postgres.TIME_MAPPING, Postgres.TIME_TRIE)
    return raw if again == strftime else None


@lru_cache(maxsize=256)
def parse(pattern: str) -> tuple[Token, ...]:
    """The pattern as PostgreSQL's to_char reads it."""
    out: list[Token] = []
    i, n = 0, len(pattern)
    while i < n:
        fill = tm = False
        j = i
        while pattern.startswith(("FM", "fm", "TM", "tm"), j):  # prefixes: fill mode, translation mode
            fill, tm = fill or pattern[j] in "Ff", tm or pattern[j] in "Tt"
            j += 2
        kw = next((k for k in _KEYWORDS if pattern.startswith(k, j)), None)
        if kw is not None:
            if kw in _ZONES:
                raise Unsupported(f"to_char pattern {kw} (time zone): times are UTC on protected tables")
            j += len(kw)
            suffix = ""
            if pattern.startswith(("TH", "th"), j):
                suffix = pattern[j:j + 2]
                j += 2
            elif pattern.startswith(("SP", "sp"), j):
                j += 2  # accepted and ignored, as upstream
            out.append(("kw", kw, fill, tm, suffix))
            i = j
            continue
        if j > i:  # a prefix with no keyword after it is copied (as upstream: it is no template)
            out.append(("lit", pattern[i:j], False, False, ""))
            i = j
            continue
        c = pattern[i]
        if c == '"':
            k, text = i + 1, []
            while k < n and pattern[k] != '"':
                if pattern[k] == "\\" and k + 1 < n:
                    k += 1
                text.append(pattern[k])
                k += 1
            out.append(("lit", "".join(text), False, False, ""))
            i = k + 1
        elif c == "\\" and i + 1 < n and pattern[i + 1] == '"':
            out.append(("lit", '"', False, False, ""))
            i += 2
        else:
            out.append(("lit", c, False, False, ""))
            i += 1
    return tuple(out)


def _ordinal(num: str, upper: bool) -> str:
    last2 = int(num[-2:]) if len(num) >= 2 else int(num)
    th = "th" if 11 <= last2 % 100 <= 13 else {1: "st", 2: "nd", 3: "rd"}.get(last2 % 10, "th")
    return num + (th.upper() if upper else th)


def _cased(name: str, kw: str) -> str:
    """A name in the keyword's case: MONTH upper, Month as is, month lower."""
    if kw.isupper():
        return name.upper()
    return name.lower() if kw.islower() else name


def _fraction(digits: int) -> Callable[[datetime], int]:
    """FF1..FF6: the first ``digits`` digits of the fraction of a second."""
    return lambda t: t.microsecond // 10 ** (6 - digits)


_FIELDS: dict[str, Callable[[datetime], int]] = {
    "CC": lambda t: (t.year + 99) // 100, "DDD": lambda t: t.timetuple().tm_yday, "DD": lambda t: t.day,
    "D": lambda t: (t.weekday() + 1) % 7 + 1, "HH24": lambda t: t.hour, "HH12": lambda t: (t.hour % 12) or 12,
    "HH": lambda t: (t.hour % 12) or 12, "IDDD": lambda t: (t.isocalendar()[1] - 1) * 7 + t.isocalendar()[2],
    "ID": lambda t: t.isocalendar()[2], "IW": lambda t: t.isocalendar()[1], "IYYY": lambda t: t.isocalendar()[0],
    "IYY": lambda t: t.isocalendar()[0] % 1000, "IY": lambda t: t.isocalendar()[0] % 100,
    "I": lambda t: t.isocalendar()[0] % 10, "MI": lambda t: t.minute, "MM": lambda t: t.month,
    "MS": lambda t: t.microsecond // 1000, "Q": lambda t: (t.month - 1) // 3 + 1,
    "SSSSS": lambda t: t.hour * 3600 + t.minute * 60 + t.second,
    "SSSS": lambda t: t.hour * 3600 + t.minute * 60 + t.second, "SS": lambda t: t.second,
    "US": lambda t: t.microsecond, "WW": lambda t: (t.timetuple().tm_yday - 1) // 7 + 1,
    "W": lambda t: (t.day - 1) // 7 + 1, "YYYY": lambda t: t.year, "YYY": lambda t: t.year % 1000,
    "YY": lambda t: t.year % 100, "Y": lambda t: t.year % 10, "J": lambda t: t.toordinal() + 1721425,
    **{f"FF{n}": _fraction(n) for n in range(1, 7)},
}
"""Each numeric field of a timestamp, computed only when its keyword is used."""


def _number(kw: str, t: datetime) -> int:
    return int(_FIELDS[kw](t))


def _keyword(kw: str, fill: bool, tm: bool, suffix: str, t: datetime) -> str:
    up = kw.upper()
    if up in ("MONTH", "DAY"):
        name = _cased(_MONTHS[t.month - 1] if up == "MONTH" else _DAYS[(t.weekday() + 1) % 7], kw)
        return name if fill or tm else name.ljust(9)  # translated names are never padded (formatting.c)
    if up in ("MON", "DY"):
        return _cased((_MONTHS[t.month - 1] if up == "MON" else _DAYS[(t.weekday() + 1) % 7])[:3], kw)
    if up == "RM":
        roman = _ROMAN[t.month - 1] if kw == "RM" else _ROMAN[t.month - 1].lower()
        return roman if fill else roman.ljust(4)
    if up in ("AM", "PM", "A.M.", "P.M."):
        text = ("P" if t.hour >= 12 else "A") + ("." if "." in kw else "") + "M" + ("." if "." in kw else "")
        return text if kw[0].isupper() else text.lower()
    if up in ("AD", "BC", "A.D.", "B.C."):
        text = ("A" if t.year > 0 else "B") + ("." if "." in kw else "") + ("D" if t.year > 0 else "C") + (
            "." if "." in kw else "")
        return text if kw[0].isupper() else text.lower()
    if up == "FX":
        return ""
    if up == "Y,YYY":
        num = f"{t.year // 1000},{t.year % 1000:03d}"
    else:
        value = _number(up, t)
        num = str(value) if fill or up in ("J", "SSSS", "SSSSS") else f"{value:0{_NUMERIC_WIDTH[up]}d}"
    return _ordinal(num, suffix == "TH") if suffix else num


@lru_cache(maxsize=65_536)
def to_char(value: date | datetime, pattern: str) -> str:
    """``to_char(value, pattern)`` as PostgreSQL writes it (a date reads as its midnight; times UTC). Cached:
    cells repeat across the rows of a product of columns and across statements."""
    t = value if isinstance(value, datetime) else datetime(value.year, value.month, value.day)
    return "".join(text if kind == "lit" else _keyword(text, fill, tm, suffix, t)
                   for kind, text, fill, tm, suffix in parse(pattern))
