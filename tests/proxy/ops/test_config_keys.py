"""The key table is the one home of every config.toml key: the parser, the defaults, the engine's settings,
the shipped example and docs/config.md all agree with it."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

from lapras.settings import EPOCH_SECONDS, EngineSettings
from proxy.config import ConfigError, keys, parse_config
from proxy.dp.engine_factory import engine_settings

REPO = Path(__file__).resolve().parents[3]
SHIPPED = tomllib.loads((REPO / "config.toml").read_text())


def shown_keys(text: str) -> set[str]:
    """`section.key` for every key config.toml sets or shows in a comment, with table names as `*`."""
    found: set[str] = set()
    section = ""
    for line in text.splitlines():
        head = re.match(r"^#?\s*\[\[?([A-Za-z0-9_.]+)\]\]?\s*$", line)
        if head:
            parts = head.group(1).split(".")
            if parts[0] in ("tables", "public_tables") and len(parts) > 1:
                parts[1] = "*"
            section = ".".join(parts)
            found.add(section)   # a header shows the key that holds its sub-table: [tables.NAME.load]
            continue
        item = re.match(r"^#?\s*([A-Za-z_]\w*)\s*=", line)
        if item:
            found.add(f"{section}.{item.group(1)}")
    return found


def minimal(**sections: Any) -> dict[str, Any]:
    tree: dict[str, Any] = {"users": [{"name": "a", "auth": "trust"}],
                            "tables": {"t": {"columns": {"x": {"type": "int", "min": 0, "max": 3}}}}}
    for name, body in sections.items():
        tree[name] = body
    return tree


@pytest.mark.parametrize("k", keys.KEYS, ids=lambda k: k.path)
def test_every_key_is_in_the_shipped_example(k: keys.Key) -> None:
    assert k.path in shown_keys((REPO / "config.toml").read_text()), \
        f"{k.path} is declared but config.toml neither sets nor shows it"


def test_every_shown_key_is_declared() -> None:
    declared = {k.path for k in keys.KEYS} | {s.name for s in keys.SECTIONS}
    shown = {p for p in shown_keys((REPO / "config.toml").read_text()) if not p.startswith("tables.*.columns")}
    assert shown <= declared, shown - declared


def test_docs_are_generated_from_the_table_and_current() -> None:
    docs = (REPO / "docs" / "config.md").read_text()
    assert docs == keys.render_markdown(), "docs/config.md is stale: python -m proxy.config --write docs/config.md"
    for sec in keys.SECTIONS:
        body = docs.split(f"## `{sec.header}`", 1)[1].split("\n## ", 1)[0]
        for k in keys.KEYS:
            if k.section == sec.name:
                assert f"| `{k.name}` |" in body, k.path


def test_defaults_come_from_the_table() -> None:
    cfg = parse_config(minimal())
    for k in keys.KEYS:
        if k.section in ("server", "tls", "privacy", "lapras") and k.name != "listen":
            assert getattr(getattr(cfg, k.section), k.name) == k.default, k.path
    assert f"{cfg.server.host}:{cfg.server.port}" == keys.default("server.listen")
    assert cfg.users[0].admin == keys.default("users.admin")
    assert cfg.catalog.tables[0].schema == keys.default("tables.*.schema")


def test_engine_settings_come_from_the_table() -> None:
    engine_keys = [k for k in keys.KEYS if k.engine]
    assert {k.engine for k in engine_keys} <= set(EngineSettings.__dataclass_fields__)
    assert set(EPOCH_SECONDS) == set(keys.key("privacy.epoch").choices)
    # Every engine key reaches the engine: set each to a non-default value and read it back.
    values = {"privacy": {"epsilon": 2.5, "delta": 1e-6, "accounting": "basic", "epoch": "weekly", "epoch_seconds": 90.0,
                          "regression_fraction": 0.1, "partition_fraction": 0.05, "partition_selections": 7,
                          "stream_length": 77},
              "lapras": {"split": "custom", "fractions": {"mm": 0.5, "bad_init": 0.2, "rem_bad": 0.2,
                                                          "reserve": 0.1},
                         "allocation": "static", "warmup": 5, "free_answer_max_stderr": 3.0,
                         "mm_time_limit": 7.5, "max_statement_work": 12345, "mm_wait": 0.5}}
    settings = engine_settings(parse_config(minimal(**values)), progress=False)
    for k in engine_keys:
        assert getattr(settings, k.engine) == values[k.section][k.name], k.path
    assert settings.epoch_length == 90.0  # epoch_seconds overrides epoch


@pytest.mark.parametrize("k", [k for k in keys.KEYS if k.section in ("server", "tls", "upstream", "privacy",
                                                                      "lapras", "predictor")],
                         ids=lambda k: k.path)
def test_wrong_type_is_named(k: keys.Key) -> None:
    wrong: Any = [1] if k.type is not list else "x"
    with pytest.raises(ConfigError) as err:
        parse_config(minimal(**{k.section: {k.name: wrong}}))
    assert any(p.startswith(f"{k.path}: must be") for p in err.value.problems), err.value.problems


def with_key(k: keys.Key, value: Any) -> dict[str, Any]:
    """A minimal config setting ``k`` (a top-level section's, the user's or the table t's) to ``value``."""
    tree = minimal()
    if k.section == "users":
        tree["users"][0][k.name] = value
    elif k.section.startswith("tables.*"):
        node = tree["tables"]["t"]
        for part in k.section.split(".")[2:]:
            node = node.setdefault(part, {})
        node[k.name] = value
    else:
        tree[k.section] = {k.name: value}
    return tree


@pytest.mark.parametrize("k", [k for k in keys.KEYS if k.choices], ids=lambda k: k.path)
def test_values_outside_the_choices_are_refused(k: keys.Key) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(with_key(k, "nonsense"))
    assert any("nonsense" in p and ", ".join(k.choices) in p for p in err.value.problems)
    for choice in k.choices:
        if k.section == "users" or choice == "custom":
            continue   # users need a matching secret; custom needs fractions
        parse_config(with_key(k, choice))


@pytest.mark.parametrize("section", ["server", "tls", "upstream", "privacy", "lapras", "predictor"])
def test_unknown_keys_are_refused(section: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(minimal(**{section: {"bogus_key": 1}}))
    assert any(p.startswith(f"{section}.bogus_key: unknown key") for p in err.value.problems)


def test_predictor_templates_are_checked() -> None:
    tree = minimal(predictor={"templates": [{"sql": "SELECT count(*) FROM t", "max_queries": 0},
                                            {"params": {}}, {"sqll": "x", "sql": "y"}, "nope"]})
    with pytest.raises(ConfigError) as err:
        parse_config(tree)
    problems = err.value.problems
    assert "predictor.templates[0].max_queries: must be a positive integer" in problems
    assert any(p.startswith("predictor.templates[1].sql") for p in problems)
    assert any(p.startswith("predictor.templates[2].sqll: unknown key") for p in problems)
    assert any(p.startswith("predictor.templates[3]") for p in problems)
    ok = parse_config(minimal(predictor={"kappa": 0.5, "templates": [{"sql": "SELECT count(*) FROM t"}]}))
    assert ok.predictor["templates"][0]["sql"] == "SELECT count(*) FROM t"


def test_shipped_example_parses_and_shows_the_keys_the_issue_named() -> None:
    text = (REPO / "config.toml").read_text()
    parse_config(SHIPPED, str(REPO / "config.toml"))
    shown = shown_keys(text)
    assert {"users.admin", "predictor.templates.sql", "predictor.templates.params"} <= shown
    assert re.search(r"^#.*\bnullable\s*=", text, re.M) and re.search(r"^#.*\bvalues\s*=", text, re.M)


def test_predictor_options_default_as_declared() -> None:
    # predict reads [predictor] itself (predictor/ does not import proxy/): its flag defaults must agree.
    import argparse

    from predictor.cli import configure_parser
    from predictor.utility import SPLIT_NAMES

    ap = argparse.ArgumentParser()
    configure_parser(ap)
    for name in ("split", "kappa", "threshold"):
        assert ap.get_default(name) == keys.default(f"predictor.{name}"), name
    assert tuple(SPLIT_NAMES) == keys.key("predictor.split").choices


def test_template_expansion_limit_defaults_as_declared() -> None:
    from predictor.declared import TemplateError, expand_template

    n = keys.default("predictor.templates.max_queries")
    assert len(expand_template({"sql": "SELECT :a", "params": {"a": {"range": [1, n]}}})) == n
    with pytest.raises(TemplateError):
        expand_template({"sql": "SELECT :a", "params": {"a": {"range": [0, n]}}})


def test_every_column_key_is_in_the_shipped_example_and_the_docs() -> None:
    found: set[str] = set()
    in_columns = False
    for line in (REPO / "config.toml").read_text().splitlines():
        head = re.match(r"^#?\s*\[\[?([A-Za-z0-9_.]+)\]\]?\s*$", line)
        if head:
            in_columns = head.group(1).startswith("tables.") and head.group(1).endswith(".columns")
        elif in_columns and "{" in line:
            found.update(re.findall(r"(\w+)\s*=", line.split("{", 1)[1]))
    assert keys.column_keys() <= found, f"config.toml shows no column with {sorted(keys.column_keys() - found)}"
    docs = (REPO / "docs" / "config.md").read_text()
    body = docs.split("## `[tables.NAME.columns]`", 1)[1].split("\n## ", 1)[0]
    for k in keys.column_keys():
        assert f"`{k}`" in body, k


def test_max_groups_per_unit_needs_a_privacy_unit_and_may_exceed_k() -> None:
    k = next(k for k in keys.KEYS if k.path == "tables.*.max_groups_per_unit")
    with pytest.raises(ConfigError) as err:
        parse_config(with_key(k, 3))
    assert any(p.startswith("tables.t.max_groups_per_unit: needs privacy_unit") for p in err.value.problems)
    with pytest.raises(ConfigError):
        parse_config(with_key(k, 0))
    tree = with_key(k, 12)
    tree["tables"]["t"].update(privacy_unit="user_id", max_rows_per_unit=3)
    t = parse_config(tree).catalog.tables[0]
    assert (t.max_groups_per_unit, t.unit_cells, t.unit_rows) == (12, 12, 3)
    del tree["tables"]["t"]["max_groups_per_unit"]
    assert parse_config(tree).catalog.tables[0].unit_cells == 3  # unset: k


def test_max_rows_per_group_needs_a_privacy_unit_and_at_most_k() -> None:
    k = next(k for k in keys.KEYS if k.path == "tables.*.max_rows_per_group")
    with pytest.raises(ConfigError) as err:
        parse_config(with_key(k, 2))
    assert any(p.startswith("tables.t.max_rows_per_group: needs privacy_unit") for p in err.value.problems)
    tree = with_key(k, 5)
    tree["tables"]["t"].update(privacy_unit="user_id", max_rows_per_unit=3)
    with pytest.raises(ConfigError) as err:
        parse_config(tree)
    assert any(p.startswith("tables.t.max_rows_per_group: 5 exceeds max_rows_per_unit = 3") for p in err.value.problems)
    tree = with_key(k, 2)
    tree["tables"]["t"].update(privacy_unit="user_id", max_rows_per_unit=3)
    t = parse_config(tree).catalog.tables[0]
    assert (t.max_rows_per_group, t.group_rows, t.unit_rows) == (2, 2, 3)


def test_per_unit_is_a_boolean_column_key_that_needs_a_privacy_unit() -> None:
    """``per_unit = true`` reaches the column's attribute; without a privacy unit, or not a boolean, it is
    named as the problem."""
    tree = minimal()
    tree["tables"]["t"]["columns"]["x"]["per_unit"] = True
    with pytest.raises(ConfigError) as err:
        parse_config(tree)
    assert any(p.startswith("tables.t.columns.x.per_unit: needs privacy_unit") for p in err.value.problems)
    tree["tables"]["t"].update(privacy_unit="user_id", max_rows_per_unit=3)
    t = parse_config(tree).catalog.tables[0]
    assert t.attribute("x").per_unit  # type: ignore[union-attr]
    tree["tables"]["t"]["columns"]["x"]["per_unit"] = "yes"
    with pytest.raises(ConfigError) as err:
        parse_config(tree)
    assert any(p.startswith("tables.t.columns.x.per_unit: must be true or false") for p in err.value.problems)
    del tree["tables"]["t"]["columns"]["x"]["per_unit"]
    assert not parse_config(tree).catalog.tables[0].attribute("x").per_unit  # type: ignore[union-attr]
    shipped = parse_config(SHIPPED).catalog.table("events")
    assert shipped is not None and shipped.attribute("country").per_unit  # type: ignore[union-attr]


def test_max_sum_per_group_names_a_numeric_column_with_a_positive_bound() -> None:
    k = next(k for k in keys.KEYS if k.path == "tables.*.max_sum_per_group")
    tree = with_key(k, {"x": 5})
    with pytest.raises(ConfigError) as err:
        parse_config(tree)
    assert any(p.startswith("tables.t.max_sum_per_group.x: needs privacy_unit") for p in err.value.problems)
    for bad, why in (({"nope": 5}, "names no declared numeric column"), ({"x": 0}, "must be a number > 0")):
        tree = with_key(k, bad)
        tree["tables"]["t"].update(privacy_unit="user_id", max_rows_per_unit=3)
        with pytest.raises(ConfigError) as err:
            parse_config(tree)
        assert any(why in p for p in err.value.problems), err.value.problems
    tree = with_key(k, {"x": 2.5})
    tree["tables"]["t"].update(privacy_unit="user_id", max_rows_per_unit=3)
    t = parse_config(tree).catalog.tables[0]
    assert t.max_sum_per_group == (("x", 2.5),) and t.group_sum_bound("x") == 2.5


def test_max_sum_per_group_auto_is_accepted_and_a_bad_word_explained() -> None:
    k = next(k for k in keys.KEYS if k.path == "tables.*.max_sum_per_group")
    tree = with_key(k, {"x": "auto"})
    tree["tables"]["t"].update(privacy_unit="user_id", max_rows_per_unit=3)
    t = parse_config(tree).catalog.tables[0]
    assert t.auto_sum_per_group == ("x",) and t.max_sum_per_group == () and t.group_sum_bound("x") is None
    tree = with_key(k, {"x": "automatic"})
    tree["tables"]["t"].update(privacy_unit="user_id", max_rows_per_unit=3)
    with pytest.raises(ConfigError) as err:
        parse_config(tree)
    assert any('or "auto" (chosen once per epoch from a DP quantile' in p for p in err.value.problems), err.value.problems
