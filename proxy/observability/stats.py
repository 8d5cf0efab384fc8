"""Per-user statement counters of one proxy process, for the admin console's SHOW STATS.

Always on (unlike the Prometheus endpoint) and cheap: one dict update per statement. Operator figures:
who ran how many statements and how they ended, never what they asked or got.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class UserStats:
    """One user's counters: statements, how they ended, and the seconds they took in all."""

    statements: int = 0
    dp_answers: int = 0
    metadata: int = 0
    refused: int = 0
    errors: int = 0
    cancelled: int = 0
    total_s: float = 0.0


class Stats:
    """Counters by user, updated by every session's executor (one event loop: no lock needed)."""

    def __init__(self) -> None:
        self.users: dict[str, UserStats] = {}

    def record(self, user: str, kind: str, outcome: str, seconds: float) -> None:
        s = self.users.get(user)
        if s is None:
            s = self.users[user] = UserStats()
        s.statements += 1
        s.total_s += seconds
        if outcome == "cancelled":
            s.cancelled += 1
        elif outcome == "refused":
            s.refused += 1
        elif outcome == "error":
            s.errors += 1
        elif kind == "dp":
            s.dp_answers += 1
        else:
            s.metadata += 1

    def rows(self) -> list[tuple[str, int, int, int, int, int, int, float, float]]:
        """(user, statements, dp_answers, metadata, refused, errors, cancelled, total ms, mean ms) by user,
        then the total as user "*"."""
        total = UserStats()
        out = []
        for user in sorted(self.users):
            s = self.users[user]
            out.append(_row(user, s))
            for name in ("statements", "dp_answers", "metadata", "refused", "errors", "cancelled", "total_s"):
                setattr(total, name, getattr(total, name) + getattr(s, name))
        out.append(_row("*", total))
        return out


def _row(user: str, s: UserStats) -> tuple[str, int, int, int, int, int, int, float, float]:
    ms = s.total_s * 1e3
    return (user, s.statements, s.dp_answers, s.metadata, s.refused, s.errors, s.cancelled, round(ms, 1),
            round(ms / s.statements, 2) if s.statements else 0.0)


def summed(rows: list[tuple[object, ...]]) -> list[tuple[str, int, int, int, int, int, int, float, float]]:
    """Per-user rows of several processes (as `Stats.rows` gives them, without the worker column; each
    process's own `*` row is skipped) summed by user, then the total as user "*": SHOW STATS over workers."""
    users: dict[str, UserStats] = {}
    for r in rows:
        user = str(r[0])
        if user == "*":
            continue
        s = users.setdefault(user, UserStats())
        s.statements += int(r[1])   # type: ignore[call-overload]
        s.dp_answers += int(r[2])   # type: ignore[call-overload]
        s.metadata += int(r[3])     # type: ignore[call-overload]
        s.refused += int(r[4])      # type: ignore[call-overload]
        s.errors += int(r[5])       # type: ignore[call-overload]
        s.cancelled += int(r[6])    # type: ignore[call-overload]
        s.total_s += float(r[7]) / 1e3   # type: ignore[arg-type]
    stats = Stats()
    stats.users = users
    return stats.rows()
