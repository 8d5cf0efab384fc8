"""A regression call as an analyst writes it, over a real proxy and PostgreSQL: a list of result columns is
projected as selected, EXPLAIN states the cost without charging, bound parameters and ORDER BY are refused
with 0A000 before anything is spent, SHOW lapras.budget shows the regression part, and a call refused for
its delta names delta. Deterministic: false-failure rate 0 (no assertion depends on the noise drawn)."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

pytest.importorskip("proxy.dp.service")

from .harness import connect, proxy_fixture  # noqa: E402

proxy = proxy_fixture("reganalyst", epsilon=1.0)   # regression part: epsilon 0.2, delta 2e-4

CALL = "lapras.linear_regression('adult', 'hours_per_week', 'age', 'adassp', 0.01, 1e-5)"


def _budget(conn: psycopg.Connection) -> dict[str, str]:
    return {str(k): str(v) for k, v in conn.execute("SHOW lapras.budget").fetchall()}


def _refused(conn: psycopg.Connection, sql: str, params: Any = None) -> psycopg.Error:
    with pytest.raises(psycopg.Error) as info:
        conn.execute(sql, params)
    return info.value


def test_an_analysts_regression_session(proxy: Any) -> None:
    with connect(proxy) as conn:
        before = _budget(conn)
        assert before["regression.budget.epsilon"] == "0.2" and before["regression.budget.delta"] == "0.0002"
        assert before["regression.spent.epsilon"] == "0"

        plan = [r[0] for r in conn.execute(f"EXPLAIN SELECT * FROM {CALL}").fetchall()]
        assert plan[0].startswith("DP linear regression (adassp) of hours_per_week on age")
        assert any("cost: epsilon = 0.01, delta = 1e-05" in ln for ln in plan)
        assert _refused(conn, "EXPLAIN SELECT * FROM lapras.linear_regression('adult', 'hours_per_week', "
                              "'nosuch')").sqlstate == "42703"

        # psycopg 3 binds %s server-side ($1): refused as such, not as "must be a string literal".
        err = _refused(conn, "SELECT * FROM lapras.linear_regression(%s, 'hours_per_week', 'age')", ("adult",))
        assert err.sqlstate == "0A000" and "bound parameter" in (err.diag.message_primary or "")
        err = _refused(conn, f"SELECT * FROM {CALL} ORDER BY term")
        assert err.sqlstate == "0A000"
        assert _refused(conn, f"SELECT * FROM {CALL} LIMIT 1").sqlstate == "0A000"
        assert _budget(conn)["regression.spent.epsilon"] == "0"   # EXPLAIN and refusals charge nothing

        cur = conn.execute(f"SELECT estimate FROM {CALL}")
        assert [d.name for d in cur.description or []] == ["estimate"]
        only = cur.fetchall()
        assert len(only) == 2 and all(len(r) == 1 and isinstance(r[0], float) for r in only)
        cur = conn.execute(f"SELECT estimate, term FROM {CALL}")   # the same call: replayed
        assert [d.name for d in cur.description or []] == ["estimate", "term"]
        assert cur.fetchall() == [(only[0][0], "intercept"), (only[1][0], "age")]
        full = conn.execute(f"SELECT * FROM {CALL}").fetchall()
        assert [r[:2] for r in full] == [("intercept", only[0][0]), ("age", only[1][0])]

        plan = [r[0] for r in conn.execute(f"EXPLAIN SELECT * FROM {CALL}").fetchall()]
        assert any("replayed, no charge" in ln for ln in plan)
        after = _budget(conn)
        assert after["regression.spent.epsilon"] == "0.01" and after["regression.spent.delta"] == "1e-05"

        # epsilon would fit (0.02 of 0.2) but delta would not (1e-5 + 1.95e-4 > 2e-4): the refusal says delta.
        err = _refused(conn, "SELECT * FROM lapras.linear_regression('adult', 'hours_per_week', 'sex', "
                             "'adassp', 0.01, 1.95e-4)")
        assert err.sqlstate == "53400"
        assert "delta" in (err.diag.message_detail or "") and "epsilon" not in (err.diag.message_detail or "")
        assert "sixth argument" in (err.diag.message_hint or "")
        assert _budget(conn)["regression.spent.epsilon"] == "0.01"
