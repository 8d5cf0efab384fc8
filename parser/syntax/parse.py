"""SQL text -> sqlglot tree, with PostgreSQL-style syntax errors (42601 and a 1-based position)."""

from __future__ import annotations

import itertools
import re
import threading
from decimal import Decimal

from sqlglot import exp
from sqlglot.dialects.postgres import Postgres
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokens import Token, TokenType

from pgcore.errors import FEATURE_NOT_SUPPORTED, SYNTAX_ERROR, Refusal
from pgcore.sqlscan import token_end

INVALID_UNICODE_ESCAPE = "22025"  # PostgreSQL: invalid_escape_sequence for a malformed \u escape
CHARACTER_NOT_IN_REPERTOIRE = "22021"


def _offset(sql: str, line: int, col: int) -> int:
    """0-based offset of sqlglot's (1-based line, 1-based col of a token's last character)."""
    lines = sql.split("\n")
    return sum(len(x) + 1 for x in lines[: max(line - 1, 0)]) + col - 1


def parse_statements(sql: str) -> list[exp.Expr]:
    """Parse every statement of ``sql`` (empty ones dropped); raise Refusal 42601 on a syntax error."""
    text = _fold_in_lists(sql)
    try:
        tokens = _DIALECT.tokenize(text)
        _check_tokens(text, tokens)
        trees = _DIALECT.parser().parse(tokens, text)
    except ParseError as e:
        raise _syntax_refusal(text, e) from None
    except TokenError as e:
        raise Refusal(SYNTAX_ERROR, f"syntax error: {e}") from None
    return [_plain_strings(sql, t) for t in trees if t is not None]


# A long IN list of plain literals (BI tools send thousands of values) costs sqlglot a token and a node
# per item, and every later pass a walk over them; read by this scanner instead, it stands in the text as
# one placeholder literal padded to the list's length (positions and line numbers stay the statement's),
# whose items ``folded_items`` gives (the WHERE pass and the scalar compiler read them).
_MIN_FOLDED = 64
_IN_HEAD = re.compile(r"(?i)\bin\s*\(\s*")
_ITEM = re.compile(r"\s*(?:(?P<num>[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)|'(?P<str>(?:[^'\\]|'')*)')\s*(?P<sep>[,)])")
_MARK = "\x00lapras-in-list-"
_FOLDED: dict[str, list[tuple[str | int | Decimal, int]]] = {}
_FOLDED_ITEMS = 400_000  # items kept for the passes after parsing (a statement is analysed right after)
_folded_held = 0
_folded_lock = threading.Lock()
_serial = itertools.count()


def _register(mark: str, items: list[tuple[str | int | Decimal, int]]) -> None:
    global _folded_held
    with _folded_lock:
        while _FOLDED and _folded_held + len(items) > _FOLDED_ITEMS:
            _folded_held -= len(_FOLDED.pop(next(iter(_FOLDED))))
        _FOLDED[mark] = items
        _folded_held += len(items)


def folded_items(node: exp.Expr) -> list[tuple[str | int | Decimal, int]] | None:
    """The (value, 0-based offset) items of an IN list the scanner folded, or None for any other node."""
    exprs = node.expressions if isinstance(node, exp.In) else []
    if len(exprs) != 1 or not isinstance(exprs[0], exp.Literal) or not exprs[0].is_string:
        return None
    mark = str(exprs[0].this)
    if not mark.startswith(_MARK):
        return None
    items = _FOLDED.get(mark)
    if items is None:
        raise Refusal(FEATURE_NOT_SUPPORTED, "an IN list read too long ago; send the statement again")
    return items


def _fold_in_lists(sql: str) -> str:
    """``sql`` with each long IN list of plain literals replaced by a placeholder (its items registered).
    Strings, quoted names and comments are skipped as the tokenizer would."""
    if len(sql) < 1000 or "(" not in sql:
        return sql
    out: list[str] = []
    i, n, last = 0, len(sql), 0
    while i < n:
        ch = sql[i]
        if ch in "'\"$-/":  # a string, quoted name, dollar-quoted body or comment: skip to its end
            end = token_end(sql, i)
            if end is not None:
                i = end
                continue
        if ch in "iI" and (i == 0 or not (sql[i - 1].isalnum() or sql[i - 1] in "_$")):
            head = _IN_HEAD.match(sql, i)
            if head is not None:
                items, j = _scan_items(sql, head.end())
                if items is not None and len(items) >= _MIN_FOLDED:
                    start, close = head.end(), j - 1  # the ')' ending the list stays
                    mark = f"{_MARK}{next(_serial)}"
                    span = sql[start:close]
                    if len(mark) + 2 <= len(span):
                        pad = "".join("\n" if c == "\n" else " " for c in span[len(mark) + 2:])
                        out.append(sql[last:start] + f"'{mark}'" + pad)
                        last = close
                        _register(mark, items)
                    i = j
                    continue
        i += 1
    if not out:
        return sql
    out.append(sql[last:])
    return "".join(out)


def _scan_items(sql: str, pos: int) -> tuple[list[tuple[str | int | Decimal, int]] | None, int]:
    """The plain literals of an IN list starting at ``pos`` (values as ``literal_value`` reads them) and the
    offset after its ')' (None: not such a list; escape strings, casts, expressions and parameters are left
    to the parser)."""
    items: list[tuple[str | int | Decimal, int]] = []
    while True:
        m = _ITEM.match(sql, pos)
        if m is None:
            return None, pos
        num = m.group("num")
        if num is not None:
            try:
                value: str | int | Decimal = int(num)
            except ValueError:
                value = Decimal(num)
            items.append((value, m.start("num")))
        else:
            items.append((m.group("str").replace("''", "'"), m.start("str") - 1))
        pos = m.end()
        if m.group("sep") == ")":
            return items, pos


def _plain_strings(sql: str, tree: exp.Expr) -> exp.Expr:
    """Escape strings (``E'a\\tb'``) and dollar-quoted ones (``$$a$$``) as the text literals they denote.

    sqlglot decodes escape strings by its own rules (``\\v`` is a vertical tab there, ``v`` in PostgreSQL),
    so they are decoded again from the statement's text, by PostgreSQL's."""
    for node in list(tree.find_all(exp.ByteString, exp.RawString)):
        value = str(node.this)
        if isinstance(node, exp.ByteString):
            start, end = node.meta.get("start"), node.meta.get("end")
            raw = sql[start:end + 1] if isinstance(start, int) and isinstance(end, int) else ""
            if len(raw) < 3 or raw[0] not in "eE" or raw[1] != "'" or raw[-1] != "'":
                raise Refusal(FEATURE_NOT_SUPPORTED, "this escape string is not supported over protected tables",
                              position=start + 1 if isinstance(start, int) else None)
            value = decode_escape_string(raw[2:-1], start if isinstance(start, int) else 0)
        lit = exp.Literal.string(value)
        lit.meta.update(node.meta)
        node.replace(lit)
    return tree


_SIMPLE_ESCAPES = {"b": b"\b", "f": b"\f", "n": b"\n", "r": b"\r", "t": b"\t"}


def decode_escape_string(body: str, start: int = 0) -> str:
    """The value of ``E'body'`` as PostgreSQL reads it (UTF-8): ``''`` and ``\\'`` a quote, ``\\b \\f \\n
    \\r \\t``, octal ``\\ooo`` and hex ``\\xhh`` bytes, ``\\uXXXX`` / ``\\UXXXXXXXX`` code points, any
    other escaped character itself; bytes that are not UTF-8, or a zero byte, raise 22021."""
    out = bytearray()
    i, n = 0, len(body)
    while i < n:
        ch = body[i]
        if ch == "'" and i + 1 < n and body[i + 1] == "'":
            out += b"'"
            i += 2
            continue
        if ch != "\\" or i + 1 >= n:
            out += ch.encode("utf-8", "surrogatepass")
            i += 1
            continue
        nxt = body[i + 1]
        if nxt in _SIMPLE_ESCAPES:
            out += _SIMPLE_ESCAPES[nxt]
            i += 2
        elif nxt in "01234567":
            j = i + 1
            while j < n and j < i + 4 and body[j] in "01234567":
                j += 1
            out.append(int(body[i + 1:j], 8) & 0xFF)
            i = j
        elif nxt == "x" and i + 2 < n and body[i + 2] in "0123456789abcdefABCDEF":
            j = i + 2
            while j < n and j < i + 4 and body[j] in "0123456789abcdefABCDEF":
                j += 1
            out.append(int(body[i + 2:j], 16))
            i = j
        elif nxt in "uU":
            width = 4 if nxt == "u" else 8
            digits = body[i + 2:i + 2 + width]
            if len(digits) != width or any(c not in "0123456789abcdefABCDEF" for c in digits):
                raise Refusal(INVALID_UNICODE_ESCAPE, "invalid Unicode escape", position=start + i + 1,
                              hint="Unicode escapes must be \\uXXXX or \\UXXXXXXXX.")
            code = int(digits, 16)
            i += 2 + width
            if 0xD800 <= code <= 0xDBFF and body[i:i + 2] in ("\\u", "\\U"):  # a surrogate pair
                w2 = 4 if body[i + 1] == "u" else 8
                low = body[i + 2:i + 2 + w2]
                if len(low) == w2 and all(c in "0123456789abcdefABCDEF" for c in low) \
                        and 0xDC00 <= int(low, 16) <= 0xDFFF:
                    code = 0x10000 + ((code - 0xD800) << 10) + (int(low, 16) - 0xDC00)
                    i += 2 + w2
            if code == 0 or code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
                raise Refusal(INVALID_UNICODE_ESCAPE, "invalid Unicode escape value", position=start + 1)
            out += chr(code).encode("utf-8")
        else:
            out += nxt.encode("utf-8", "surrogatepass")
            i += 2
    if 0 in out:
        raise Refusal(CHARACTER_NOT_IN_REPERTOIRE, 'invalid byte sequence for encoding "UTF8": 0x00')
    try:
        return out.decode("utf-8")
    except UnicodeDecodeError as e:
        bad = " ".join(f"0x{b:02x}" for b in out[e.start:e.end])
        raise Refusal(CHARACTER_NOT_IN_REPERTOIRE, f'invalid byte sequence for encoding "UTF8": {bad}') from None


DATE_PART = "date_part"
"""``meta`` flag of an ``exp.Extract`` written ``date_part(...)`` (typed double precision, not numeric)."""


class _Postgres(Postgres):
    """PostgreSQL as sqlglot reads it, except ``to_char``: sqlglot rewrites its pattern into strftime codes,
    folding case (``'dd'`` inside quoted text becomes ``DD``); kept as written for parser.semantics.tochar."""

    class Parser(Postgres.Parser):  # type: ignore[misc,valid-type]  # sqlglot declares it as a variable
        FUNCTIONS = {**Postgres.Parser.FUNCTIONS,
                     "TO_CHAR": lambda args: exp.Anonymous(this="to_char", expressions=args)}
        FUNCTION_PARSERS = {**Postgres.Parser.FUNCTION_PARSERS,
                            "DATE_PART": lambda self: self._parse_date_part_marked()}

        def _parse_date_part_marked(self) -> exp.Expr:
            # sqlglot reads date_part(f, x) as EXTRACT(f FROM x); PostgreSQL types the first double
            # precision and the second numeric (since 14): the node remembers which it was.
            node = self._parse_date_part()
            node.meta[DATE_PART] = True
            return node


_DIALECT = _Postgres()
# Tokens after which a comma can never come in PostgreSQL; sqlglot's parser is lenient about them.
_NOT_AFTER_COMMA = {TokenType.COMMA, TokenType.FROM, TokenType.WHERE, TokenType.GROUP_BY, TokenType.ORDER_BY,
                    TokenType.R_PAREN, TokenType.HAVING, TokenType.LIMIT, TokenType.SEMICOLON}


def _check_tokens(sql: str, tokens: list[Token]) -> None:
    """Reject what sqlglot would silently accept but PostgreSQL does not (``a,, b``; ``a, FROM``)."""
    for prev, tok in zip(tokens, tokens[1:], strict=False):
        if prev.token_type == TokenType.COMMA and tok.token_type in _NOT_AFTER_COMMA:
            raise Refusal(SYNTAX_ERROR, f'syntax error at or near "{sql[tok.start : tok.end + 1]}"',
                          position=tok.start + 1)
    if tokens and tokens[-1].token_type == TokenType.COMMA:
        raise Refusal(SYNTAX_ERROR, "syntax error at end of input", position=len(sql.rstrip()) + 1)


def _error_start(sql: str, err: dict[str, object]) -> int | None:
    """0-based offset of the token sqlglot blames.

    sqlglot reports the text just before the token (``start_context``, up to 100 characters) and the token
    itself (``highlight``); locating that text is independent of how line breaks are counted.
    """
    before, highlight = str(err.get("start_context") or ""), str(err.get("highlight") or "")
    idx = sql.find(before + highlight)
    if idx >= 0:
        return idx + len(before)
    line, col = err.get("line"), err.get("col")
    if isinstance(line, int) and isinstance(col, int):
        return max(_offset(sql, line, col) - len(highlight) + 1, 0)
    return None


def _syntax_refusal(sql: str, e: ParseError) -> Refusal:
    err: dict[str, object] = dict(e.errors[0]) if e.errors else {}
    highlight = str(err.get("highlight") or "")
    start = _error_start(sql, err)
    if start is None:
        return Refusal(SYNTAX_ERROR, "syntax error")
    start = min(start, len(sql))
    rest = sql[start + len(highlight) :].strip().rstrip(";").strip()
    desc = str(err.get("description") or "")
    # sqlglot blames the last token when input ends early; PostgreSQL says "at end of input" there.
    if not highlight or (not rest and ("Required keyword" in desc or "Expecting" in desc or "Expected" in desc)):
        return Refusal(SYNTAX_ERROR, "syntax error at end of input", position=len(sql.rstrip().rstrip(";")) + 1)
    return Refusal(SYNTAX_ERROR, f'syntax error at or near "{highlight}"', position=start + 1, detail=desc or None)


def position_of(node: exp.Expr | None) -> int | None:
    """1-based offset of the first token of ``node`` that sqlglot located, as PostgreSQL reports it."""
    if node is None:
        return None
    best: int | None = None
    for n in node.walk():
        meta = n.meta if isinstance(n, exp.Expr) else None
        if meta and isinstance(meta.get("start"), int):
            start = int(meta["start"])
            if best is None or start < best:
                best = start
    return None if best is None else best + 1


def literal_value(node: exp.Literal) -> str | int | Decimal:
    """A SQL literal as PostgreSQL types it: text, integer, or exact numeric."""
    if node.is_string:
        return str(node.this)
    text = str(node.this)
    try:
        return int(text)
    except ValueError:
        return Decimal(text)
