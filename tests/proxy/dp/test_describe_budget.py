"""Describe never spends privacy budget: the result shape of a DP query comes from the SQL alone."""

from __future__ import annotations

from tests.fixtures.local_proxy import Target


def test_describe_spends_no_budget(e2e: Target) -> None:
    """Parse + Describe of a never-seen DP query reports its shape and leaves the ledger untouched."""
    from tests.fixtures import pgwire_frames as wire
    from tests.fixtures.local_proxy import RawClient

    c = RawClient(e2e.host, e2e.port)
    c.login_trust()
    try:
        def budget() -> list[tuple[str, bytes]]:
            c.send(wire.query("SHOW lapras.budget"))
            return [m for m in c.until_ready() if m[0] == "D"]

        before = budget()
        assert before, "SHOW lapras.budget returned no rows"
        sql = "SELECT AVG(hours_per_week), COUNT(*) FROM adult WHERE age BETWEEN 23 AND 61 AND sex = $1"
        c.send(wire.parse(sql, "never_run") + wire.describe("S", "never_run")
               + wire.bind([b"1"], stmt="never_run", rformats=(1,)) + wire.describe("P") + wire.SYNC)
        msgs = c.until_ready()
        assert "".join(k for k, _ in msgs) == "1tT2TZ"
        assert budget() == before
    finally:
        c.close()
