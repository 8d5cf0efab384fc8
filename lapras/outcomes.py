"""How the engine answered: one statement's outcome and each of its queries' (str enums, so they compare
equal to, format as and serialise to the words the proxy's logs, metrics and EXPLAIN use)."""

from __future__ import annotations

from enum import StrEnum


class Outcome(StrEnum):
    """A statement's outcome (``Answer.outcome``, ``Preview.outcome``, the online policy's decision)."""

    REPEAT = "repeat"  # every query already answered in the epoch: replayed, no spend, no stream item
    ZERO = "zero"  # every query exactly 0 (an empty range): nothing read
    GOOD = "good"  # answered from P's release or free estimates meeting the accuracy rule: no spend
    BAD = "bad"  # one Gaussian release over the queries without an acceptable free estimate
    FREE_AFTER_STOP = "free_after_stop"  # the stream stopped; every query had a free estimate
    REFUSED = "refused"  # the stream stopped and some query has no free estimate (53400)


class QueryOutcome(StrEnum):
    """One linear query's outcome within its statement (``Answer.outcomes``, the ledger's stored answers)."""

    REPEAT = "repeat"  # its stored answer, replayed
    ZERO = "zero"  # exactly 0
    FRESH = "fresh"  # released now (combined with its free estimate when one exists)
    FREE = "free"  # its free estimate (P's release) alone
