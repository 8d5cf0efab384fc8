"""Array literals in text form (``{a,"b c",NULL}``): how a client sends a list bound to ``col = ANY($1)``."""

from __future__ import annotations

from . import errors as E
from .errors import Refusal


def array_items(s: str) -> list[str | None]:
    """The elements of an array literal (``{a,"b c",NULL}``), nested braces flattened as ``= ANY`` reads
    them; a quoted ``"NULL"`` is the text NULL, an unquoted one is NULL."""
    items: list[str | None] = []
    s = s.strip()
    i, n, depth = 0, len(s), 0
    if not s.startswith("{") or not s.endswith("}"):
        raise Refusal(E.INVALID_TEXT_REPRESENTATION, f'malformed array literal: "{s[:40]}"')
    while i < n:
        ch = s[i]
        if ch == "{":
            depth += 1
            i += 1
        elif ch == "}":
            depth -= 1
            i += 1
        elif ch in ", \t\n":
            i += 1
        elif ch == '"':
            i += 1
            out = []
            while i < n and s[i] != '"':
                if s[i] == "\\" and i + 1 < n:
                    i += 1
                out.append(s[i])
                i += 1
            if i >= n:
                raise Refusal(E.INVALID_TEXT_REPRESENTATION, f'malformed array literal: "{s[:40]}"')
            items.append("".join(out))
            i += 1
        else:
            j = i
            while j < n and s[j] not in ",{}":
                j += 1
            word = s[i:j].strip()
            items.append(None if word.upper() == "NULL" else word)
            i = j
    if depth != 0:
        raise Refusal(E.INVALID_TEXT_REPRESENTATION, f'malformed array literal: "{s[:40]}"')
    return items
