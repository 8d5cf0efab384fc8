"""Start a crash-test worker many times without paying its imports each time: one server process imports
the worker script once (numpy, scipy, the engine: seconds of CPU), then forks a fresh child per round. Each
child is a real process with its own ledger connections, noise generators (seeded from the OS when the
engine is built, after the fork) and state; SIGKILL ends it the way it ends a freshly started one.

Run as a script by `Forkserver`: ``python forkserver.py WORKER.py``. The protocol on its pipes: it prints
``warm`` once imported; each line read from stdin is one child's argv (a JSON list); it prints ``child PID`` after forking
and ``exited PID STATUS`` once the child is gone. The children write their own lines to the same stdout.
"""

from __future__ import annotations

import importlib.util
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any


class Forkserver:
    """The server for one worker script; `start` forks a child, `kill` SIGKILLs it and reaps it."""

    def __init__(self, script: Path, env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen([sys.executable, __file__, str(script)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, env=env)
        self.pending: list[str] = []
        self.reaped: set[int] = set()
        assert self._line() == "warm\n", "the fork server did not start"

    def _line(self) -> str:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line, f"the fork server ended (exit code {self.proc.poll()})"
        return line

    def start(self, *args: str) -> int:
        """Fork a child running the worker's main() with these arguments; returns its pid."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(list(args)) + "\n")
        self.proc.stdin.flush()
        while True:
            line = self._line()
            if line.startswith("child "):
                return int(line.split()[1])
            self.pending.append(line)

    def readline(self) -> str:
        """The running child's next line ("" once it has exited)."""
        line = self.pending.pop(0) if self.pending else self._line()
        if line.startswith("exited "):
            self.reaped.add(int(line.split()[1]))
            return ""
        return line

    def kill(self, pid: int) -> list[str]:
        """SIGKILL the child (if still running) and wait until it is reaped; returns the lines it wrote
        before dying that were not read yet."""
        if pid not in self.reaped:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        rest: list[str] = []
        while pid not in self.reaped:
            line = self.readline()
            if line:
                rest.append(line)
        return rest

    def lines_until_killed(self, pid: int, seconds: float) -> list[str]:
        """The child's lines for ``seconds`` (or until it is done), then SIGKILL: lines it wrote before
        the kill but that were not read yet are included, since they left the process too."""
        deadline = time.time() + seconds
        lines: list[str] = []
        while time.time() < deadline:
            line = self.readline()
            if not line or line.startswith("done"):
                break
            lines.append(line)
        return lines + self.kill(pid)

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(30)

    def __enter__(self) -> Forkserver:
        return self

    def __exit__(self, *exc: Any) -> None:
        if exc[0] is not None:
            self.proc.kill()
        self.close()


def kill_moment(rnd: random.Random, round_: int, rounds: int, window: float) -> float:
    """Seconds into round ``round_`` of ``rounds`` to kill at: one moment per slice of the window
    (stratified), so every run kills both early and late."""
    return rnd.uniform(0.05 + round_ * window / rounds, 0.05 + (round_ + 1) * window / rounds)


def _serve(script: str) -> None:
    # The worker's directory in place of this one (tests/ would shadow packages named like its folders).
    sys.path[0] = str(Path(script).parent)
    spec = importlib.util.spec_from_file_location("forked_worker", script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    print("warm", flush=True)
    for line in sys.stdin:
        sys.stdout.flush()  # nothing buffered may be written twice, by parent and child
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                sys.argv = [script, *json.loads(line)]
                module.main()
            except BaseException:  # noqa: BLE001 - reported by the exit status
                import traceback

                traceback.print_exc()
                code = 1
            finally:
                sys.stdout.flush()
                os._exit(code)
        print(f"child {pid}", flush=True)
        _, status = os.waitpid(pid, 0)
        print(f"exited {pid} {status}", flush=True)


if __name__ == "__main__":
    _serve(sys.argv[1])
