"""Worker processes for `serve --workers N`: fork them, replace any that dies, and never leave orphans.

The supervisor (the process the operator started) forks N workers that share the port (SO_REUSEPORT) and
the ledger. A worker that dies is replaced under the same index (its cancel socket and metrics port with
it); a burst of deaths (a worker that cannot start) stops everything with an error instead of looping.
SIGTERM or SIGINT to the supervisor stops every worker and waits for them; SIGHUP is passed to every worker
(each re-reads the configuration). Workers ask the kernel for
SIGTERM when the supervisor dies (PR_SET_PDEATHSIG), so even a SIGKILL of the supervisor leaves no worker
serving on its own.
"""

from __future__ import annotations

import ctypes
import logging
import os
import shutil
import signal
import tempfile
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger("lapras.supervisor")

PR_SET_PDEATHSIG = 1
BURST_DEATHS = 5
BURST_SECONDS = 30.0
KILL_AFTER_S = 20
"""Seconds after a stop signal before workers still running are killed (each exits by itself after 10)."""

WorkerMain = Callable[[int, Path, bool], None]
"""worker(index, private directory for cancel sockets, first start?) runs until told to stop."""


def _die_with(parent: int) -> None:
    """Have the kernel send SIGTERM to this process when ``parent`` exits (Linux)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):   # not Linux: the getppid check below still catches a dead parent
        pass
    if os.getppid() != parent:          # the parent died before prctl took effect
        os._exit(0)


class Supervisor:
    """Runs ``workers`` copies of ``main`` and keeps them running until stopped."""

    def __init__(self, workers: int, main: WorkerMain) -> None:
        self.workers = workers
        self.main = main
        self.children: dict[int, int] = {}      # pid -> worker index
        self.stopping = False
        self.failed = False
        self._deaths: deque[float] = deque(maxlen=BURST_DEATHS)
        self.directory = Path(tempfile.mkdtemp(prefix="lapras-workers-"))   # 0700: cancel sockets

    def _spawn(self, index: int, first: bool) -> None:
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                for sig in (signal.SIGINT, signal.SIGTERM):
                    signal.signal(sig, signal.SIG_DFL)
                signal.signal(signal.SIGHUP, signal.SIG_IGN)   # the worker's server installs its reload
                _die_with(parent)
                self.main(index, self.directory, first)
            except BaseException:
                log.exception("worker %d failed", index)
                code = 1
            os._exit(code)
        self.children[pid] = index

    def _signal_all(self, signum: int) -> None:
        for pid in list(self.children):
            try:
                os.kill(pid, signum)
            except ProcessLookupError:
                pass

    def _on_signal(self, signum: int, _frame: object) -> None:
        self.stopping = True
        self._signal_all(signum)
        # A worker stuck in its shutdown is killed rather than waited for forever (its spends are durable).
        signal.signal(signal.SIGALRM, self._on_overdue)
        signal.alarm(KILL_AFTER_S)

    def _on_reload(self, signum: int, _frame: object) -> None:
        """SIGHUP (from the operator, or a worker's RELOAD): every worker re-reads the configuration."""
        log.info("SIGHUP: reloading the configuration in %d worker(s)", len(self.children))
        self._signal_all(signum)

    def _on_overdue(self, _signum: int, _frame: object) -> None:
        if self.children:
            log.error("%d worker(s) still running %d s after the stop; killing them", len(self.children),
                      KILL_AFTER_S)
            self._signal_all(signal.SIGKILL)

    def run(self) -> int:
        """Supervise until SIGTERM/SIGINT (exit code 0) or a burst of worker deaths (exit code 1)."""
        signal.signal(signal.SIGINT, self._on_signal)
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGHUP, self._on_reload)
        try:
            for i in range(self.workers):
                self._spawn(i, first=True)
            while self.children:
                try:
                    pid, status = os.wait()
                except ChildProcessError:
                    break
                index = self.children.pop(pid, None)
                if index is None or self.stopping:
                    continue
                self._replace(index, pid, status)
        finally:
            shutil.rmtree(self.directory, ignore_errors=True)
        return 1 if self.failed else 0

    def _replace(self, index: int, pid: int, status: int) -> None:
        now = time.monotonic()
        self._deaths.append(now)
        how = (f"signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status) else f"exit code {os.WEXITSTATUS(status)}")
        if len(self._deaths) == BURST_DEATHS and now - self._deaths[0] < BURST_SECONDS:
            log.error("worker %d (pid %d) ended with %s; %d workers died within %.0f s, stopping all",
                      index, pid, how, BURST_DEATHS, BURST_SECONDS)
            self.failed = self.stopping = True
            self._signal_all(signal.SIGTERM)
            return
        log.warning("worker %d (pid %d) ended with %s; starting a replacement", index, pid, how)
        self._spawn(index, first=False)
