"""The fuzzers' runner: a seeded sweep over a grammar (cheap, replayable with ``LAPRAS_FUZZ_SEED``), then
hypothesis's edge-biased randoms over the same grammar (a grammar is a function of a ``random.Random``); and
the wire fuzzers' common grammar piece."""

from __future__ import annotations

import os
import random
import struct
from collections.abc import Callable, Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from . import wire

LONG = os.environ.get("LAPRAS_FUZZ_LONG") == "1"
SEED = int(os.environ.get("LAPRAS_FUZZ_SEED") or random.SystemRandom().randrange(2**32))


def fuzz(prop: Callable[[random.Random], None], name: str, sweep: int, examples: settings) -> None:
    """Run ``prop`` over ``sweep`` seeded cases (a failure names the seed and case), then over the
    hypothesis examples ``examples`` allows."""
    for case in range(sweep):
        try:
            prop(random.Random(SEED * 1_000_003 + case))
        except BaseException as exc:
            raise AssertionError(f"{name} failed at LAPRAS_FUZZ_SEED={SEED}, case {case}: {exc!r}") from exc

    @examples
    @given(r=st.randoms(use_true_random=False))
    def run(r: random.Random) -> None:
        prop(r)

    run()


def wire_piece(r: random.Random, valid: Sequence[bytes], garbage: int, body: int, bad_type: Callable[[random.Random], int],
               bad_lengths: Sequence[int], truncations: bool) -> bytes:
    """One piece of a fuzzed byte stream: one of the ``valid`` messages, up to ``garbage`` random bytes, a random
    type with a random body of up to ``body`` bytes, a ``bad_type(r)`` byte with one of ``bad_lengths``, or
    (with ``truncations``) the start of a valid message."""
    kind = r.randrange(5 if truncations else 4)
    if kind == 0:
        return r.choice(valid)
    if kind == 1:
        return r.randbytes(r.randint(1, garbage))
    if kind == 2:
        return wire.msg(bytes([r.randrange(256)]), r.randbytes(r.randint(0, body)))
    if kind == 3:
        return bytes([bad_type(r)]) + struct.pack("!i", r.choice(bad_lengths))
    return r.choice(valid)[:r.randint(0, 8)]
