"""The admin console across worker processes: each worker answers for itself, the one asked asks them all.

With `--workers N` every worker keeps its own sessions, statement counters and pools, and the kernel hands
a console connection to any one of them. So that `SHOW STATS`, `SHOW CLIENTS` and `SHOW SERVERS` describe
the whole proxy, every worker listens on a Unix socket in the supervisor's private directory (0700, as the
cancel sockets: only the proxy's own account reaches it) and answers one request, the name of a SHOW,
with its own rows as JSON; PAUSE and RESUME the same way, so that they hold and release the whole proxy
(PAUSE is confirmed once that worker's running statements have finished). The worker running the command
asks every other worker at once and merges their rows with its own; a worker that does not answer in time
(being replaced) is left out and named in the log. The role check happened before, in the asking worker (`proxy.statements.admin`); the socket
answers figures only, never a secret or a statement.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable, Sequence

from .worker_socket import WorkerSocket

log = logging.getLogger("lapras.admin")

FIGURES = ("STATS", "CLIENTS", "SERVERS")
"""The SHOW commands whose rows are per worker (the others read shared state: config, ledger)."""
ACTIONS = ("PAUSE", "RESUME")
"""Console actions every worker takes when one is asked (RELOAD and SHUTDOWN go through the supervisor)."""
ASK_TIMEOUT_S = 2.0
_MAX_REQUEST = 64

Rows = list[list[object]]
Local = Callable[[str], Awaitable[Sequence[Sequence[object]]]]
Act = Callable[[str], Awaitable[None]]


class WorkerFigures(WorkerSocket):
    """Worker ``index``'s end: answers peers' requests from ``local(what)`` and asks the peers."""

    kind = "figures"

    async def start(self, local: Local, act: Act | None = None) -> None:
        """Answer peers: SHOW rows from ``local(what)``, PAUSE/RESUME by ``act(what)`` (answered when done:
        PAUSE once this worker's running statements have finished)."""
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                line = await asyncio.wait_for(reader.readline(), ASK_TIMEOUT_S)
                what = line[:_MAX_REQUEST].decode("ascii", "replace").strip()
                if what in FIGURES:
                    rows = await local(what)
                    writer.write(json.dumps(rows, default=str).encode() + b"\n")
                    await writer.drain()
                elif what in ACTIONS and act is not None:
                    await act(what)
                    writer.write(b"[]\n")
                    await writer.drain()
            except Exception as exc:   # a peer's failure must never reach this worker's clients
                log.debug("figures request failed: %s", exc)
            finally:
                writer.close()

        await self.listen(handle, limit=1 << 24)

    def _peers(self) -> list[int]:
        out = []
        for p in self.directory.glob(f"{self.kind}-*.sock"):
            with contextlib.suppress(ValueError):
                n = int(p.stem.split("-", 1)[1])
                if n != self.index:
                    out.append(n)
        return sorted(out)

    async def _ask(self, worker: int, what: str, timeout: float = ASK_TIMEOUT_S) -> Rows | None:
        try:
            async with asyncio.timeout(timeout):
                reader, writer = await asyncio.open_unix_connection(str(self.path(worker)), limit=1 << 24)
                try:
                    writer.write(what.encode() + b"\n")
                    await writer.drain()
                    data = await reader.readline()
                finally:
                    writer.close()
            rows = json.loads(data)
            return rows if isinstance(rows, list) else None
        except (OSError, TimeoutError, ValueError) as exc:
            log.warning("%s: worker %d did not answer (%s)%s", what, worker, exc or type(exc).__name__,
                        "; its rows are left out" if what in FIGURES else "")
            return None

    async def gather(self, what: str) -> list[Rows]:
        """Every other worker's rows for SHOW ``what`` (those that answered)."""
        answers = await asyncio.gather(*(self._ask(w, what) for w in self._peers()))
        return [a for a in answers if a is not None]

    async def tell(self, what: str, timeout: float) -> list[int]:
        """Have every other worker take the action ``what``; the workers that did not confirm it in time."""
        peers = self._peers()
        answers = await asyncio.gather(*(self._ask(w, what, timeout) for w in peers))
        return [w for w, a in zip(peers, answers, strict=True) if a is None]
