"""Caches keyed by statement digests and bounded in bytes: SQL text of any length costs a fixed-size key,
and the values held never exceed a byte budget (an entry larger than an eighth of it is not kept).

The planner's template and plan caches and the proxy's route and Describe caches use this class; callers
estimate each value's size (``approx_size``) since Python offers no cheap exact measure.
"""

from __future__ import annotations

import hashlib
import sys
from collections import OrderedDict
from collections.abc import Hashable, Iterable
from threading import Lock
from typing import Any

KEY_BYTES = 16
_ENTRY_OVERHEAD = 200  # the OrderedDict slot, the key and the value's tuple


def digest(*parts: str | bytes) -> bytes:
    """A 16-byte BLAKE2b digest of the parts (each length-prefixed, so part boundaries matter)."""
    h = hashlib.blake2b(digest_size=KEY_BYTES)
    for p in parts:
        b = p.encode("utf-8", "surrogatepass") if isinstance(p, str) else p
        h.update(len(b).to_bytes(8, "little"))
        h.update(b)
    return h.digest()


def approx_size(value: object, _depth: int = 0) -> int:
    """A rough byte size of strings, bytes, numbers and containers of them (cheap, never exact)."""
    if isinstance(value, str | bytes | bytearray):
        return sys.getsizeof(value)
    if isinstance(value, list | tuple | set | frozenset) and _depth < 3:
        return sys.getsizeof(value) + sum(approx_size(v, _depth + 1) for v in value)
    if isinstance(value, dict) and _depth < 3:
        return sys.getsizeof(value) + sum(approx_size(k, _depth + 1) + approx_size(v, _depth + 1)
                                          for k, v in value.items())
    return 64


class DigestLRU:
    """A thread-safe LRU map bounded in entries and in (estimated) bytes; keys should be digests."""

    def __init__(self, max_entries: int, max_bytes: int) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.bytes = 0
        self._data: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self._lock = Lock()

    def __len__(self) -> int:
        return len(self._data)

    def get(self, key: Hashable) -> Any:
        """The value stored under ``key`` (marked recently used), or None."""
        with self._lock:
            hit = self._data.get(key)
            if hit is None:
                return None
            self._data.move_to_end(key)
            return hit[0]

    def put(self, key: Hashable, value: Any, size: int) -> None:
        """Store ``value`` of about ``size`` bytes, evicting the least recently used entries to fit."""
        size += _ENTRY_OVERHEAD
        with self._lock:
            old = self._data.pop(key, None)
            if old is not None:
                self.bytes -= old[1]
            if size * 8 > self.max_bytes or self.max_entries <= 0:
                return  # too large to be worth a slot: computing it again is cheaper than holding it
            self._data[key] = (value, size)
            self.bytes += size
            while len(self._data) > self.max_entries or self.bytes > self.max_bytes:
                _, (_, w) = self._data.popitem(last=False)
                self.bytes -= w

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
            self.bytes = 0

    def keys(self) -> Iterable[Hashable]:
        with self._lock:
            return list(self._data)
