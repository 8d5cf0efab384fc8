"""Cancel keys across worker processes: the key names its worker, and a worker hands a foreign key over.

With `--workers N` the kernel spreads connections over the processes sharing the port (SO_REUSEPORT), so
a CancelRequest (a connection of its own) usually reaches a worker that does not run the statement. The
low bits of each session's process id name the worker that owns it; a worker receiving someone else's key
forwards (pid, secret) over a Unix socket in a directory private to the proxy's account, and the owner
checks the secret as for a local request. Nothing about the session is revealed to the sender.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import struct
from collections.abc import Callable
from pathlib import Path

from .worker_socket import WorkerSocket

log = logging.getLogger("lapras.cancel")

WORKER_BITS = 6
MAX_WORKERS = 1 << WORKER_BITS
_MSG = struct.Struct("!iI")


def worker_of(pid: int) -> int:
    """The worker index a session's process id encodes."""
    return pid & (MAX_WORKERS - 1)


def new_pid(worker: int, taken: Callable[[int], bool]) -> int:
    """A fresh positive 31-bit process id naming ``worker`` in its low bits, not ``taken``."""
    while True:
        pid = ((secrets.randbelow((1 << (31 - WORKER_BITS)) - 1) + 1) << WORKER_BITS) | worker
        if not taken(pid):
            return pid


class CancelRelay(WorkerSocket):
    """Worker ``index``'s end: a listener for forwarded keys and a sender to the other workers."""

    kind = "cancel"

    def __init__(self, index: int, directory: Path) -> None:
        if not 0 <= index < MAX_WORKERS:
            raise ValueError(f"at most {MAX_WORKERS} workers")
        super().__init__(index, directory)

    async def start(self, cancel_local: Callable[[int, int], None]) -> None:
        """Listen for keys forwarded to this worker; each is passed to ``cancel_local(pid, secret)``."""
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            with contextlib.suppress(Exception):
                pid, secret = _MSG.unpack(await asyncio.wait_for(reader.readexactly(_MSG.size), 5))
                cancel_local(pid, secret)
            writer.close()

        await self.listen(handle)

    async def forward(self, pid: int, secret: int) -> None:
        """Hand a key to the worker it names (silently dropped when that worker is not there)."""
        target = worker_of(pid)
        try:
            _, writer = await asyncio.wait_for(asyncio.open_unix_connection(str(self.path(target))), 2)
            writer.write(_MSG.pack(pid, secret & 0xFFFFFFFF))
            await writer.drain()
            writer.close()
        except (OSError, TimeoutError):
            log.debug("cancel key for worker %d dropped: no such worker", target)
