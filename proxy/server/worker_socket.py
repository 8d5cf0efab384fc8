"""A worker's Unix socket for its peers: named by its kind and worker index in the supervisor's private
directory, listened on by its owner alone (0600), taken over by a replaced worker, closed with the worker.
The cancel relay (``cancel_relay.py``) and the console's per-worker figures (``worker_figures.py``) are two
such sockets."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


class WorkerSocket:
    """Worker ``index``'s end of the ``kind`` sockets: ``<directory>/<kind>-<worker>.sock``, one a worker."""

    kind: str
    """The sockets' name prefix (``cancel``, ``figures``): one kind's sockets never reach another's."""

    def __init__(self, index: int, directory: Path) -> None:
        self.index = index
        self.directory = directory
        self._server: asyncio.base_events.Server | None = None

    def path(self, worker: int) -> Path:
        return self.directory / f"{self.kind}-{worker}.sock"

    async def listen(self, handle: Handler, **options: Any) -> None:
        """Serve this worker's socket with ``handle`` (``options``: asyncio.start_unix_server's)."""
        path = self.path(self.index)
        path.unlink(missing_ok=True)        # a replaced worker takes over its predecessor's socket
        self._server = await asyncio.start_unix_server(handle, path=str(path), **options)
        path.chmod(0o600)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
