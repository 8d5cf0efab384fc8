"""The key table: every config.toml key as declared by its section's settings class, looked up by path.

Everything else reads this table, as pgbouncer's config does from its one key table: `proxy.config.load`
parses, defaults and validates with it; `proxy.dp.engine_factory` maps the keys marked `engine` onto the
engine's settings; `docs/config.md` is rendered from it (`python -m proxy.config --write
docs/config.md`); and a test fails when a key is missing from the shipped config.toml or the docs, or when
the docs are stale. The keys themselves are declared once, in `proxy.config.sections`.
"""

from __future__ import annotations

from typing import Any

from parser import coltypes

from .declare import Key, Section, declared_keys, section_of
from .sections import DECLARED

SECTIONS: tuple[Section, ...] = tuple(section_of(cls) for cls in DECLARED)
KEYS: tuple[Key, ...] = tuple(k for cls in DECLARED for k in declared_keys(cls))

_BY_PATH = {k.path: k for k in KEYS}


def key(path: str) -> Key:
    """The declared key at `section.name`; KeyError for an undeclared one."""
    return _BY_PATH[path]


def default(path: str) -> Any:
    """The declared default, for the settings dataclasses' fields."""
    return _BY_PATH[path].default


def section_keys(section: str) -> dict[str, Key]:
    return {k.name: k for k in KEYS if k.section == section}


def _type_name(t: type | tuple[type, ...]) -> str:
    names = {"str": "string", "int": "integer", "float": "number", "bool": "boolean", "dict": "table",
             "list": "array"}
    kinds = t if isinstance(t, tuple) else (t,)
    return " or ".join(names.get(k.__name__, k.__name__) for k in kinds)


def _toml(value: Any) -> str:
    """A default as the docs table shows it: its TOML literal in backticks, or (none)."""
    if value is None:
        return "(none)"
    literal = str(value).lower() if isinstance(value, bool) else f'"{value}"' if isinstance(value, str) else repr(value)
    return f"`{literal}`"


def column_keys() -> frozenset[str]:
    """Every key a column declaration may use; the column types own them (parser.coltypes)."""
    out = set(coltypes.COMMON_KEYS)
    for cls in coltypes.COLUMN_TYPES.values():
        out |= cls.config_keys
    return frozenset(out)


def _render_columns() -> list[str]:
    """The column types and their keys, read from the column-type classes that parse them."""
    common = ", ".join(f"`{k}`" for k in sorted(coltypes.COMMON_KEYS))
    out = ["## `[tables.NAME.columns]`", "",
           "One `COLUMN = { type = \"...\", ... }` per column: its **public** domain, which decides the "
           f"groups that exist and bounds every SUM. Every type takes {common} (`nullable = true` makes "
           "NULL one more group; default false. `per_unit = true`, with a privacy unit: the column is an "
           "attribute of the unit, one value on all its rows (a customer's region), so a GROUP BY on such "
           "columns only keeps each unit in one group with up to k rows there (noise as without GROUP BY), "
           "whatever `max_rows_per_group` says; enforced, so a unit whose value varies keeps one of its groups; "
           "default false, docs/bounding.md); each type adds its own keys. The column-type classes in "
           "`parser/coltypes/` parse and check these.", "",
           "| type | also written | its keys | domain |", "|---|---|---|---|"]
    seen: set[type] = set()
    for cls in coltypes.COLUMN_TYPES.values():
        if cls in seen:
            continue
        seen.add(cls)
        aliases = ", ".join(f"`{n}`" for n in cls.config_names if n != cls.type_name) or "-"
        own = ", ".join(f"`{k}`" for k in sorted(cls.config_keys)) or "-"
        doc = " ".join((cls.__doc__ or "").split()).replace("``", "`").split(". ")[0].rstrip(".")
        out.append(f"| `{cls.type_name}` | {aliases} | {own} | {doc.replace('|', '/')} |")
    return [*out, ""]


def render_markdown() -> str:
    """docs/config.md: every section and key of the table, in declaration order."""
    out = ["# config.toml reference", "",
           "Generated from the key table in `proxy/config/sections.py` by "
           "`python -m proxy.config --write docs/config.md`; do not edit by hand.",
           "`lapras-proxy check-config --config PATH` validates a file and names every problem with its fix.",
           "The shipped `config.toml` is the documented example: it sets or shows every key below.", ""]
    for sec in SECTIONS:
        out += [f"## `{sec.header}`", "", sec.doc, "", "| key | type | default | meaning |", "|---|---|---|---|"]
        for k in KEYS:
            if k.section != sec.name:
                continue
            meaning = k.doc
            if k.choices:
                meaning += "; one of " + ", ".join(f"`{c}`" for c in k.choices)
            if k.required:
                meaning += " (required)"
            out.append(f"| `{k.name}` | {_type_name(k.type)} | {_toml(k.default)} | {meaning.replace('|', '/')} |")
        out.append("")
        if sec.name == "tables.*":
            out += _render_columns()
    return "\n".join(out)
