"""Query log lines are one JSON object each, with ids, codes and costs only."""

from __future__ import annotations

import io
import json
import logging

import pytest

from proxy.observability import querylog


def test_line_is_json_with_expected_fields() -> None:
    stream = io.StringIO()
    handler = querylog.configure(stream)
    try:
        qid = querylog.query_id("count|adult|age:[30,39]")
        querylog.log_query("analyst", "answered", 12.3456, query_ids=[qid], mu=0.05, session=7,
                           kind="select")
        querylog.log_query("analyst", "refused", 0.5, sqlstate="42501")
    finally:
        logging.getLogger(querylog.LOGGER_NAME).removeHandler(handler)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2
    first, second = (json.loads(x) for x in lines)
    assert first["user"] == "analyst" and first["outcome"] == "answered"
    assert first["query_ids"] == [qid] and len(qid) == 16
    assert first["mu"] == 0.05 and first["latency_ms"] == 12.346 and first["session"] == 7
    assert second["sqlstate"] == "42501" and "mu" not in second
    assert set(first) <= {"ts", "user", "outcome", "latency_ms", "query_ids", "sqlstate", "mu", "epsilon",
                          "delta", "session", "kind"}


def test_query_id_is_stable() -> None:
    assert querylog.query_id("k") == querylog.query_id("k")
    assert querylog.query_id("k") != querylog.query_id("k2")


@pytest.mark.parametrize("kwargs", [
    {"outcome": "leaked"},
    {"sqlstate": "not a code"},
    {"query_ids": ["SELECT count(*) FROM adult"]},
    {"query_ids": ["12345"]},
    {"mu": float("nan")},
    {"mu": "0.1"},
])
def test_rejects_anything_that_could_carry_data(kwargs: dict) -> None:
    args = {"user": "u", "outcome": "answered", "latency_ms": 1.0, **kwargs}
    with pytest.raises(ValueError):
        querylog.build_record(**args)


def test_finish_statement_feeds_metrics_and_log() -> None:
    import time

    from proxy.observability.metrics import ProxyMetrics

    stream = io.StringIO()
    handler = querylog.configure(stream)
    m = ProxyMetrics()
    try:
        querylog.finish_statement(m, "analyst", "bad", time.perf_counter() - 0.01, query_keys=["k1", "k2"],
                                  mu=0.02, session=3)
        querylog.finish_statement(m, "analyst", "refused", time.perf_counter(), sqlstate="53400")
    finally:
        logging.getLogger(querylog.LOGGER_NAME).removeHandler(handler)
    first, second = (json.loads(x) for x in stream.getvalue().splitlines())
    assert first["outcome"] == "answered" and first["latency_ms"] >= 10
    assert first["query_ids"] == [querylog.query_id("k1"), querylog.query_id("k2")]
    assert second["sqlstate"] == "53400"
    assert m.queries.value(outcome="answered") == 1 and m.errors.value(sqlstate="53400") == 1
