"""How a config.toml key is declared: once, as a field of its section's settings class.

A section is a frozen dataclass decorated with `section(...)`; each key is a field whose default is
`setting(default=..., doc=..., ...)`, carrying the key's allowed values, check and meaning. The key table
(`proxy.config.keys`), the loader, the engine's settings and docs/config.md all read these declarations,
so a key's name, type, default and check are written in one place. A key that sets an engine knob names
`lapras.settings.EngineSettings`' field of its own name: declared with `default=ENGINE_DEFAULT`, it takes
that field's default, the engine's own.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar, dataclass_transform

from lapras.settings import EngineSettings

Check = Callable[[Any], str | None]
T = TypeVar("T")

_ENGINE_DEFAULTS = {f.name: f.default for f in dataclasses.fields(EngineSettings)}
ENGINE_DEFAULT: Any = object()
"""A key's default that is the engine's own: the key sets `EngineSettings`' field of its name."""


@dataclass(frozen=True)
class Section:
    """A part of config.toml: a table (`[server]`), an array of tables (`[[users]]`) or one table per name."""

    name: str  # dotted path with `*` for a name the user picks: "tables.*.load"
    header: str  # as written in config.toml
    doc: str


@dataclass(frozen=True)
class Key:
    """One configuration key, as read from its field's declaration."""

    section: str
    name: str
    type: type | tuple[type, ...]
    default: Any
    doc: str
    choices: tuple[str, ...] = ()
    check: Check | None = None  # returns the problem (with its fix), or None when the value is fine
    engine: str = ""  # the lapras.settings.EngineSettings field this key sets
    required: bool = False

    @property
    def path(self) -> str:
        return f"{self.section}.{self.name}"


@dataclass(frozen=True)
class _Spec:
    doc: str
    choices: tuple[str, ...]
    check: Check | None
    engine: bool
    required: bool


def setting(
    default: Any = dataclasses.MISSING,
    doc: str = "",
    *,
    choices: tuple[str, ...] = (),
    check: Check | None = None,
    required: bool = False,
    default_factory: Callable[[], Any] | None = None,
) -> Any:
    """A key's field: its default (`ENGINE_DEFAULT`: the engine's, set by `section`), meaning and checks.
    `default_factory` gives a mutable default a fresh value per instance (the key table shows it as none)."""
    if default is dataclasses.MISSING and default_factory is None:
        raise TypeError("a key needs a default")
    spec = _Spec(doc, choices, check, default is ENGINE_DEFAULT, required)
    if default_factory is not None:
        return dataclasses.field(default_factory=default_factory, metadata={"key": spec})
    return dataclasses.field(default=default, metadata={"key": spec})


@dataclass_transform(frozen_default=True, field_specifiers=(setting, dataclasses.field))
def section(name: str, header: str, doc: str) -> Callable[[type[T]], type[T]]:
    """Make the class a frozen dataclass whose `setting` fields are the keys of section `name`."""

    def wrap(cls: type[T]) -> type[T]:
        for attr, value in vars(cls).items():
            if isinstance(value, dataclasses.Field) and value.default is ENGINE_DEFAULT:
                value.default = _ENGINE_DEFAULTS[attr]  # an engine knob: the engine's own default
        out = dataclass(frozen=True)(cls)
        out.__config_section__ = Section(name, header, doc)  # type: ignore[attr-defined]
        return out

    return wrap


def _kinds(hint: Any) -> type | tuple[type, ...]:
    """The runtime types a TOML value of this annotation may have (None is the absent key's default)."""
    args = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
    kinds = tuple(typing.get_origin(a) or a for a in args if a is not type(None))  # dict[str, x] -> dict
    return kinds[0] if len(kinds) == 1 else kinds


def section_of(cls: type) -> Section:
    """The section a settings class declares."""
    sec: Section = cls.__config_section__  # type: ignore[attr-defined]
    return sec


def declared_keys(cls: type) -> list[Key]:
    """The keys a settings class declares, in field order."""
    sec, hints = section_of(cls), typing.get_type_hints(cls)
    return [
        Key(
            sec.name,
            f.name,
            _kinds(hints[f.name]),
            None if f.default is dataclasses.MISSING else f.default,
            spec.doc,
            spec.choices,
            spec.check,
            f.name if spec.engine else "",
            spec.required,
        )
        for f in dataclasses.fields(cls)
        if (spec := f.metadata.get("key")) is not None
    ]
