"""Names in config.toml: every name PostgreSQL stores is accepted exactly as written (TOML quoted keys for
odd ones); names PostgreSQL cannot store are refused with the key, the reason and the fix."""

from __future__ import annotations

import tomllib
from typing import Any

import pytest

from pgcore.identifiers import display_ident, fold, mention_pattern, quote_ident, split_qualified
from proxy.config import ConfigError, parse_config

ODD = ["Sales_3", "Number of Records", "FB.", "twitter#user#screen_name", "Agep (bin)", "a.b", "x:y", "Ärger",
       'say "hi"; DROP TABLE t; --', "it's", "L" + "ö" * 31, "select", " lead", "$1", "日本語"]


def tree(table: str, column: str, schema: str = "public") -> dict[str, Any]:
    return {"users": [{"name": "a", "auth": "trust"}],
            "tables": {table: {"schema": schema, "columns": {column: {"type": "int", "min": 0, "max": 3}}}}}


@pytest.mark.parametrize("name", ODD)
def test_any_postgresql_name_is_accepted_as_written(name: str) -> None:
    cfg = parse_config(tree(name, name, name))
    t = cfg.catalog.tables[0]
    assert (t.schema, t.name, t.attributes[0].name) == (name, name, name)
    assert cfg.catalog.table(name, name) is t and t.attribute(name) is not None


def test_quoted_toml_keys_declare_odd_names() -> None:
    text = '''
[[users]]
name = "a"
auth = "trust"
[tables."Sales_3"]
schema = "Tableau Extract"
[tables."Sales_3".columns]
"Number of Records" = { type = "int", min = 0, max = 9 }
"twitter#user#screen_name" = { type = "text", values = ["x"] }
[tables.sales_3.columns]
n = { type = "int", min = 0, max = 9 }
'''
    cfg = parse_config(tomllib.loads(text))
    assert [t.name for t in cfg.catalog.tables] == ["Sales_3", "sales_3"]  # two tables, as in PostgreSQL
    assert [a.name for a in cfg.catalog.tables[0].attributes] == ["Number of Records", "twitter#user#screen_name"]
    assert cfg.catalog.table("SALES_3") is None


@pytest.mark.parametrize("where", ["table", "column", "schema", "privacy_unit"])
def test_names_postgresql_cannot_store_are_refused(where: str) -> None:
    too_long = "x" * 64
    t = tree("t", "c")
    if where == "table":
        t["tables"] = {too_long: t["tables"]["t"]}
    elif where == "column":
        t["tables"]["t"]["columns"] = {too_long: {"type": "int", "min": 0, "max": 3}}
    elif where == "schema":
        t["tables"]["t"]["schema"] = too_long
    else:
        t["tables"]["t"]["privacy_unit"] = too_long
    with pytest.raises(ConfigError) as err:
        parse_config(t)
    assert "is 64 bytes long in UTF-8; PostgreSQL names are at most 63 bytes" in str(err.value)
    assert "shorten it" in str(err.value)


def test_63_bytes_is_the_limit_in_bytes_not_characters() -> None:
    parse_config(tree("é" * 31 + "x", "c"))  # 63 bytes
    with pytest.raises(ConfigError) as err:
        parse_config(tree("é" * 32, "c"))  # 32 characters, 64 bytes
    assert 'tables."' + "é" * 32 + '"' in str(err.value)  # the key as TOML writes it


@pytest.mark.parametrize("name", ["", "a\x00b"])
def test_empty_and_nul_names_are_refused(name: str) -> None:
    with pytest.raises(ConfigError):
        parse_config(tree("t", name))


def test_values_from_takes_a_dotted_sql_name() -> None:
    t = tree("t", "c")
    t["tables"]["t"]["columns"]["c"] = {"type": "text", "values_from": '"Public Lists"."Cities 2".Name'}
    cfg = parse_config(t)
    assert split_qualified(cfg.catalog.tables[0].attributes[0].domain.values_from) == (  # type: ignore[attr-defined]
        "Public Lists", "Cities 2", "name")
    t["tables"]["t"]["columns"]["c"] = {"type": "text", "values_from": "a.b.c; DROP TABLE x"}
    with pytest.raises(ConfigError, match="values_from"):
        parse_config(t)


def test_quoting_and_folding_are_postgresql_s() -> None:
    import sqlglot

    def first(sql: str) -> Any:
        return sqlglot.parse_one(sql, read="postgres").expressions[0]

    assert fold(first('SELECT "Foo Bar"')) == "Foo Bar"
    assert fold(first("SELECT FooBar")) == "foobar"
    assert fold(first("SELECT ÄRGER")) == "Ärger"  # A-Z only, as PostgreSQL folds in UTF-8
    assert fold(first('SELECT "' + "ö" * 40 + '"')) == "ö" * 31  # cut at 63 bytes, on a character
    assert quote_ident('a"b') == '"a""b"'
    assert [display_ident(n) for n in ("age", "Age", "a b", "a$1", "1a")] == ["age", '"Age"', '"a b"', "a$1", '"1a"']
    p = mention_pattern(["FB.", 'a"b', "adult"])
    assert p is not None
    assert p.search('SELECT count(*) FROM "FB."') and p.search('FROM "a""b"') and p.search("FROM ADULT")
    assert not p.search("FROM adults") and not p.search("FROM FB_x")


def test_partition_selection_keys_quote_odd_names() -> None:
    from parser.bind.partition import PartitionRequest

    def key(schema: str, table: str, *cols: str) -> str:
        return PartitionRequest(table, schema, cols, "all", "", 1).key

    assert key("public", "t", "city") == "public.t|keys(city)|all"  # plain names: as before
    assert key("public", "t", "a,b") != key("public", "t", "a", "b")
    assert key("public", "a.b", "c") != key("public.a", "b", "c")
    assert key("public", "T", "City") == 'public."T"|keys("City")|all'


def test_a_config_file_with_odd_names_loads_as_written(tmp_path: Any) -> None:
    from proxy.config import load_config, toml_key

    names = {n: toml_key(n) for n in ODD}
    cols = "\n".join(f'{k} = {{ type = "int", min = 0, max = 1 }}' for k in names.values())
    path = tmp_path / "config.toml"
    path.write_text(f'[[users]]\nname = "a"\nauth = "trust"\n[tables.{names[ODD[9]]}]\nschema = "S \\"x\\""\n'
                    f"[tables.{names[ODD[9]]}.columns]\n{cols}\n", encoding="utf-8")
    t = load_config(path).catalog.tables[0]
    assert (t.schema, t.name, [a.name for a in t.attributes]) == ('S "x"', ODD[9], ODD)


def test_data_argument_names_a_table_whose_name_holds_an_equals_sign(tmp_path: Any) -> None:
    from proxy.ops.cliargs import parse_data_args as _parse_data_args

    t = tree("a", "c")
    t["tables"]["a=b"] = t["tables"]["a"]
    cfg = parse_config(t)
    for name in ("one.csv", "b=two.csv"):
        (tmp_path / name).write_text("c\n1\n")
    got = _parse_data_args(cfg, [f"a=b={tmp_path}/one.csv", f"a={tmp_path}/b=two.csv"])
    assert got == {"a=b": tmp_path / "one.csv", "a": tmp_path / "b=two.csv"}
