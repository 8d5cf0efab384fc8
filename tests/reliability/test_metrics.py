"""The metrics registry renders valid Prometheus text and the HTTP endpoint serves it."""

from __future__ import annotations

import asyncio
import re
import threading

import pytest

from proxy.observability.metrics import ProxyMetrics, Registry, start_metrics_server

# One sample line of the text format: name, optional labels, value.
SAMPLE = re.compile(r'^[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\\n]|\\.)*",?)*\})? '
                    r'(-?[0-9.e+-]+|NaN|\+Inf|-Inf)$')


def _check_format(text: str) -> None:
    assert text.endswith("\n")
    for line in text.splitlines():
        if line.startswith("#"):
            assert re.match(r"^# (HELP|TYPE) [a-zA-Z_:][a-zA-Z0-9_:]* .+$", line), line
        else:
            assert SAMPLE.match(line), line


def test_counter_gauge_histogram_render() -> None:
    r = Registry()
    c = r.counter("x_total", "things", ["outcome"])
    g = r.gauge("budget", "left", ["unit"])
    h = r.histogram("lat_seconds", "latency", ["outcome"], buckets=[0.1, 1.0])
    c.inc(outcome="answered")
    c.inc(2, outcome="answered")
    c.inc(outcome='we"ird\\\n')
    g.set(0.25, unit="mu")
    h.observe(0.05, outcome="a")
    h.observe(0.5, outcome="a")
    h.observe(5.0, outcome="a")
    text = r.render()
    _check_format(text)
    assert 'x_total{outcome="answered"} 3' in text
    assert 'x_total{outcome="we\\"ird\\\\\\n"} 1' in text
    assert 'budget{unit="mu"} 0.25' in text
    assert 'lat_seconds_bucket{outcome="a",le="0.1"} 1' in text
    assert 'lat_seconds_bucket{outcome="a",le="1"} 2' in text
    assert 'lat_seconds_bucket{outcome="a",le="+Inf"} 3' in text
    assert 'lat_seconds_count{outcome="a"} 3' in text
    assert 'lat_seconds_sum{outcome="a"} 5.55' in text
    with pytest.raises(ValueError):
        c.inc(-1, outcome="answered")
    with pytest.raises(ValueError):
        c.inc(wrong="x")
    with pytest.raises(ValueError):
        r.counter("x_total", "dup")


def test_gauge_callback_failure_omits_sample() -> None:
    r = Registry()
    g = r.gauge("b", "budget", ["unit"])
    g.set_function(lambda: 1.5, unit="mu")
    g.set_function(lambda: 1 / 0, unit="eps")
    text = r.render()
    assert 'b{unit="mu"} 1.5' in text
    assert "eps" not in text


def test_thread_safety() -> None:
    m = ProxyMetrics()

    def work() -> None:
        for _ in range(5000):
            m.observe_query("answered", 0.001)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert m.queries.value(outcome="answered") == 40000
    assert m.latency.count(outcome="answered") == 40000


async def _http(port: int, request: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    await writer.drain()
    data = await asyncio.wait_for(reader.read(), 5)
    writer.close()
    return data


def test_http_endpoint() -> None:
    async def main() -> None:
        m = ProxyMetrics()
        m.observe_query("refused", 0.002, sqlstate="42501")
        m.set_budget(0.3, 0.39, "mu")
        server = await start_metrics_server(m.registry, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            ok = await _http(port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            head, _, body = ok.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 200")
            assert b"text/plain; version=0.0.4" in head
            text = body.decode()
            _check_format(text)
            assert 'lapras_queries_total{outcome="refused"} 1' in text
            assert 'lapras_errors_total{sqlstate="42501"} 1' in text
            assert 'lapras_budget_remaining{unit="mu"} 0.3' in text
            assert (await _http(port, b"GET /other HTTP/1.1\r\n\r\n")).startswith(b"HTTP/1.1 404")
            assert (await _http(port, b"POST /metrics HTTP/1.1\r\n\r\n")).startswith(b"HTTP/1.1 405")
            # Garbage and an oversized request end that connection only; the endpoint keeps serving.
            await _http(port, b"\x00\xff garbage\r\n\r\n")
            await _http(port, b"GET /" + b"a" * 20000 + b" HTTP/1.1\r\n\r\n")
            again = await _http(port, b"GET /metrics HTTP/1.0\r\n\r\n")
            assert again.startswith(b"HTTP/1.1 200")
        finally:
            server.close()
            await server.wait_closed()

    asyncio.run(main())
