"""DBA-declared templates in config.toml, expanded into P."""

from __future__ import annotations

import tomllib

import pytest

from predictor.declared import TemplateError, expand_templates

CONFIG = """
[[predictor.templates]]
sql = "SELECT COUNT(*) FROM adult WHERE age BETWEEN :lo AND :hi"
params = { lo = { range = [20, 80, 10] }, hi = { expr = "lo + 9" } }

[[predictor.templates]]
sql = "SELECT SUM(x) FROM t WHERE region = :r AND kind = :k AND note = ':r'"
params = { r = { values = ["north", "o'hara"] }, k = { value = 3 } }
"""


def test_expand_from_toml() -> None:
    specs = tomllib.loads(CONFIG)["predictor"]["templates"]
    out = expand_templates(specs)
    assert out[:2] == [
        "SELECT COUNT(*) FROM adult WHERE age BETWEEN 20 AND 29",
        "SELECT COUNT(*) FROM adult WHERE age BETWEEN 30 AND 39",
    ]
    assert out[6] == "SELECT COUNT(*) FROM adult WHERE age BETWEEN 80 AND 89"
    assert out[7:] == [
        "SELECT SUM(x) FROM t WHERE region = 'north' AND kind = 3 AND note = ':r'",
        "SELECT SUM(x) FROM t WHERE region = 'o''hara' AND kind = 3 AND note = ':r'",
    ]


def test_cartesian_product_and_chained_expressions() -> None:
    out = expand_templates(
        [
            {
                "sql": "SELECT COUNT(*) FROM t WHERE a = :a AND b = :b AND c = :c AND d = :d",
                "params": {
                    "a": {"values": [1, 2]},
                    "b": {"range": [5, 3, -1]},
                    "d": {"expr": "c * 2"},
                    "c": {"expr": "a + b"},
                },
            }
        ]
    )
    assert len(out) == 6
    assert out[0] == "SELECT COUNT(*) FROM t WHERE a = 1 AND b = 5 AND c = 6 AND d = 12"


def test_casts_are_not_placeholders() -> None:
    assert expand_templates([{"sql": "SELECT COUNT(*) FROM t WHERE a::int = :a", "params": {"a": 1}}]) == [
        "SELECT COUNT(*) FROM t WHERE a::int = 1"
    ]


@pytest.mark.parametrize(
    "spec",
    [
        {"sql": "SELECT COUNT(*) FROM t WHERE a = :a"},  # no parameter
        {"sql": "SELECT 1", "params": {"a": {"range": [1, 5, 0]}}},
        {"sql": "SELECT 1", "params": {"a": {"expr": "__import__('os')"}}},
        {"sql": "SELECT 1", "params": {"a": {"expr": "b + 1"}, "b": {"expr": "a + 1"}}},
        {"sql": "SELECT 1", "params": {"a": {"what": 1}}},
        {"sql": "", "params": {}},
        {"sql": "SELECT :a", "params": {"a": {"range": [1, 100000]}}, "max_queries": 10},
    ],
)
def test_bad_templates(spec: dict) -> None:
    with pytest.raises(TemplateError):
        expand_templates([spec])
