"""Prometheus text-format metrics: a small thread-safe registry and an asyncio `GET /metrics` endpoint.

The registry only ever holds counts, latencies and budget figures; nothing derived from an answer's value
is a metric. Updates are cheap (a dict lookup under a lock) because they sit on the per-query path and the
engine runs in worker threads.
"""

from __future__ import annotations

import asyncio
import math
import re
import threading
from bisect import bisect_left
from collections.abc import Callable, Iterable, Sequence

_NAME_RE = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
_LABEL_RE = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")

# Latency buckets in seconds: sub-millisecond cache hits up to statement-timeout territory.
DEFAULT_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
                   30.0, 60.0)

LabelKey = tuple[str, ...]


def _fmt(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if float(value).is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(float(value))


def _escape_label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


class _Metric:
    """Shared part of every metric family: name, help, label names, one value per label set."""

    kind = "untyped"

    def __init__(self, name: str, help_text: str, labelnames: Sequence[str] = ()) -> None:
        if not _NAME_RE.match(name):
            raise ValueError(f"invalid metric name {name!r}")
        for label in labelnames:
            if not _LABEL_RE.match(label) or label.startswith("__") or label == "le":
                raise ValueError(f"invalid label name {label!r}")
        self.name = name
        self.help = help_text
        self.labelnames = tuple(labelnames)
        self._lock = threading.Lock()

    def _key(self, labels: dict[str, str]) -> LabelKey:
        if set(labels) != set(self.labelnames):
            raise ValueError(f"{self.name} takes labels {self.labelnames}, got {tuple(labels)}")
        return tuple(str(labels[n]) for n in self.labelnames)

    def _labels(self, key: LabelKey, extra: Iterable[tuple[str, str]] = ()) -> str:
        pairs = [*zip(self.labelnames, key, strict=True), *extra]
        if not pairs:
            return ""
        return "{" + ",".join(f'{n}="{_escape_label(v)}"' for n, v in pairs) + "}"

    def header(self) -> list[str]:
        return [f"# HELP {self.name} {_escape_help(self.help)}", f"# TYPE {self.name} {self.kind}"]

    def samples(self) -> list[str]:
        raise NotImplementedError


class Counter(_Metric):
    """A monotonically increasing count per label set."""

    kind = "counter"

    def __init__(self, name: str, help_text: str, labelnames: Sequence[str] = ()) -> None:
        super().__init__(name, help_text, labelnames)
        self._values: dict[LabelKey, float] = {}
        if not self.labelnames:
            self._values[()] = 0.0

    def inc(self, amount: float = 1.0, **labels: str) -> None:
        """Add `amount` (>= 0) to the series with these labels."""
        if amount < 0:
            raise ValueError("a counter only goes up")
        key = self._key(labels)
        with self._lock:
            self._values[key] = self._values.get(key, 0.0) + amount

    def value(self, **labels: str) -> float:
        """Current value of one series (0 if never incremented)."""
        with self._lock:
            return self._values.get(self._key(labels), 0.0)

    def samples(self) -> list[str]:
        with self._lock:
            items = sorted(self._values.items())
        return [f"{self.name}{self._labels(k)} {_fmt(v)}" for k, v in items]


class Gauge(_Metric):
    """A value that goes up and down, set directly or read from a callback at scrape time."""

    kind = "gauge"

    def __init__(self, name: str, help_text: str, labelnames: Sequence[str] = ()) -> None:
        super().__init__(name, help_text, labelnames)
        self._values: dict[LabelKey, float] = {}
        self._functions: dict[LabelKey, Callable[[], float | None]] = {}

    def set(self, value: float, **labels: str) -> None:
        """Set the series with these labels."""
        key = self._key(labels)
        with self._lock:
            self._values[key] = float(value)

    def inc(self, amount: float = 1.0, **labels: str) -> None:
        """Add `amount` (may be negative)."""
        key = self._key(labels)
        with self._lock:
            self._values[key] = self._values.get(key, 0.0) + amount

    def dec(self, amount: float = 1.0, **labels: str) -> None:
        """Subtract `amount`."""
        self.inc(-amount, **labels)

    def set_function(self, fn: Callable[[], float | None], **labels: str) -> None:
        """Read this series from `fn` at every scrape (None or an exception omits the sample)."""
        key = self._key(labels)
        with self._lock:
            self._functions[key] = fn

    def value(self, **labels: str) -> float | None:
        """Current value of one series, calling its function if it has one."""
        key = self._key(labels)
        with self._lock:
            fn = self._functions.get(key)
            stored = self._values.get(key)
        return _call(fn) if fn is not None else stored

    def samples(self) -> list[str]:
        with self._lock:
            items = dict(self._values)
            fns = dict(self._functions)
        for key, fn in fns.items():
            got = _call(fn)
            if got is None:
                items.pop(key, None)
            else:
                items[key] = got
        return [f"{self.name}{self._labels(k)} {_fmt(v)}" for k, v in sorted(items.items())]


def _call(fn: Callable[[], float | None]) -> float | None:
    # A failing callback (e.g. the ledger database is down) must not break the whole scrape.
    try:
        got = fn()
    except Exception:
        return None
    return None if got is None else float(got)


class Histogram(_Metric):
    """Cumulative buckets, sum and count of observations per label set."""

    kind = "histogram"

    def __init__(self, name: str, help_text: str, labelnames: Sequence[str] = (),
                 buckets: Sequence[float] = DEFAULT_BUCKETS) -> None:
        super().__init__(name, help_text, labelnames)
        bounds = sorted(float(b) for b in buckets if not math.isinf(b))
        if not bounds or len(set(bounds)) != len(bounds):
            raise ValueError("buckets must be distinct finite numbers")
        self.buckets = tuple(bounds)
        # Per label set: counts per bucket (non-cumulative, last slot is +Inf), sum.
        self._counts: dict[LabelKey, list[int]] = {}
        self._sums: dict[LabelKey, float] = {}

    def observe(self, value: float, **labels: str) -> None:
        """Record one observation."""
        key = self._key(labels)
        slot = bisect_left(self.buckets, value)
        with self._lock:
            counts = self._counts.get(key)
            if counts is None:
                counts = self._counts[key] = [0] * (len(self.buckets) + 1)
                self._sums[key] = 0.0
            counts[slot] += 1
            self._sums[key] += value

    def count(self, **labels: str) -> int:
        """Number of observations of one series."""
        with self._lock:
            return sum(self._counts.get(self._key(labels), []))

    def samples(self) -> list[str]:
        with self._lock:
            items = sorted((k, list(c), self._sums[k]) for k, c in self._counts.items())
        out: list[str] = []
        for key, counts, total in items:
            running = 0
            for bound, n in zip((*self.buckets, math.inf), counts, strict=True):
                running += n
                out.append(f"{self.name}_bucket{self._labels(key, [('le', _fmt(bound))])} {running}")
            out.append(f"{self.name}_sum{self._labels(key)} {_fmt(total)}")
            out.append(f"{self.name}_count{self._labels(key)} {running}")
        return out


class Registry:
    """A named set of metric families rendered together in the Prometheus text format (version 0.0.4)."""

    def __init__(self) -> None:
        self._metrics: dict[str, _Metric] = {}
        self._lock = threading.Lock()

    def _add(self, metric: _Metric) -> _Metric:
        with self._lock:
            if metric.name in self._metrics:
                raise ValueError(f"metric {metric.name} is already registered")
            self._metrics[metric.name] = metric
        return metric

    def counter(self, name: str, help_text: str, labelnames: Sequence[str] = ()) -> Counter:
        """Register and return a counter."""
        m = self._add(Counter(name, help_text, labelnames))
        assert isinstance(m, Counter)
        return m

    def gauge(self, name: str, help_text: str, labelnames: Sequence[str] = ()) -> Gauge:
        """Register and return a gauge."""
        m = self._add(Gauge(name, help_text, labelnames))
        assert isinstance(m, Gauge)
        return m

    def histogram(self, name: str, help_text: str, labelnames: Sequence[str] = (),
                  buckets: Sequence[float] = DEFAULT_BUCKETS) -> Histogram:
        """Register and return a histogram."""
        m = self._add(Histogram(name, help_text, labelnames, buckets))
        assert isinstance(m, Histogram)
        return m

    def render(self) -> str:
        """The whole registry in the text exposition format."""
        with self._lock:
            metrics = list(self._metrics.values())
        lines: list[str] = []
        for m in metrics:
            lines.extend(m.header())
            lines.extend(m.samples())
        return "\n".join(lines) + "\n"


class ProxyMetrics:
    """The proxy's metric families; the server and the DP service update them, `/metrics` renders them."""

    def __init__(self, registry: Registry | None = None) -> None:
        self.registry = registry or Registry()
        r = self.registry
        self.queries = r.counter("lapras_queries_total",
                                 "Statements finished, by outcome (answered, from_p, free, refused, error, "
                                 "metadata).", ["outcome"])
        self.errors = r.counter("lapras_errors_total", "ErrorResponses sent, by SQLSTATE.", ["sqlstate"])
        self.latency = r.histogram("lapras_query_duration_seconds",
                                   "Time from a statement's arrival to its last result message, by outcome.",
                                   ["outcome"])
        self.budget_remaining = r.gauge("lapras_budget_remaining",
                                        "Privacy budget left in the current epoch (unit: mu for gdp, "
                                        "epsilon for basic).", ["unit"])
        self.budget_total = r.gauge("lapras_budget_total", "Privacy budget of the current epoch.", ["unit"])
        self.connections = r.gauge("lapras_connections_active", "Client connections open now.")
        self.connections_total = r.counter("lapras_connections_total", "Client connections accepted.")
        self.rejected = r.counter("lapras_connections_rejected_total",
                                  "Connections ended by a limit or a failed login, by reason.", ["reason"])

    def observe_query(self, outcome: str, latency_s: float, sqlstate: str | None = None) -> None:
        """Count one finished statement; call once per statement, after its last message is sent."""
        self.queries.inc(outcome=outcome)
        self.latency.observe(latency_s, outcome=outcome)
        if sqlstate:
            self.errors.inc(sqlstate=sqlstate)

    def set_budget(self, remaining: float, total: float, unit: str) -> None:
        """Publish the epoch's budget after a spend (or register callbacks with `budget_remaining`)."""
        self.budget_remaining.set(remaining, unit=unit)
        self.budget_total.set(total, unit=unit)


_MAX_REQUEST = 8192
_READ_TIMEOUT_S = 5.0


async def _handle(registry: Registry, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), _READ_TIMEOUT_S)
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ConnectionError):
        writer.close()
        return
    request_line = head.split(b"\r\n", 1)[0].decode("latin-1")
    parts = request_line.split(" ")
    if len(parts) != 3:
        status, body, ctype = "400 Bad Request", "bad request\n", "text/plain"
    elif parts[0] not in ("GET", "HEAD"):
        status, body, ctype = "405 Method Not Allowed", "only GET\n", "text/plain"
    elif parts[1].split("?", 1)[0] != "/metrics":
        status, body, ctype = "404 Not Found", "try /metrics\n", "text/plain"
    else:
        # Rendering may call gauge callbacks that do I/O; keep them off the event loop.
        body = await asyncio.to_thread(registry.render)
        status, ctype = "200 OK", "text/plain; version=0.0.4; charset=utf-8"
    payload = body.encode("utf-8")
    headers = (f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {len(payload)}\r\n"
               f"Connection: close\r\n\r\n").encode("ascii")
    try:
        writer.write(headers + (b"" if parts[0] == "HEAD" else payload))
        await writer.drain()
    except ConnectionError:
        pass
    finally:
        writer.close()


async def start_metrics_server(registry: Registry, host: str, port: int) -> asyncio.Server:
    """Serve `GET /metrics` on host:port until the returned server is closed."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _handle(registry, reader, writer)

    return await asyncio.start_server(handler, host, port, limit=_MAX_REQUEST)
