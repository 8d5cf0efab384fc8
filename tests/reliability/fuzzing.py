"""The fuzzers' runner: a seeded sweep over a grammar (cheap, replayable with ``LAPRAS_FUZZ_SEED``), then
hypothesis's edge-biased randoms over the same grammar (a grammar is a function of a ``random.Random``)."""

from __future__ import annotations

import os
import random
from collections.abc import Callable

from hypothesis import given, settings
from hypothesis import strategies as st

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
