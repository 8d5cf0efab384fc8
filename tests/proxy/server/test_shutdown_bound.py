"""A stopping server's wait for its tasks is bounded: a task that will not end once cancelled is named in
the log and does not hold the stop (asyncio.run alone would wait for it for ever)."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from proxy.ops.app import _end_other_tasks


async def _stubborn() -> None:
    while True:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            continue  # swallows every cancellation, as a stuck client library call might


async def _polite() -> None:
    await asyncio.sleep(3600)


def test_tasks_that_end_when_cancelled_are_waited_for() -> None:
    async def main() -> tuple[bool, list[asyncio.Task[None]]]:
        tasks = [asyncio.create_task(_polite()) for _ in range(3)]
        await asyncio.sleep(0)
        return await _end_other_tasks(5.0), tasks

    ended, tasks = asyncio.run(main())
    assert ended and all(t.cancelled() for t in tasks)


def test_a_task_that_ignores_cancellation_is_named_and_given_up(caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> bool:
        asyncio.create_task(_polite())
        asyncio.create_task(_stubborn(), name="stuck-one")
        await asyncio.sleep(0)
        return await _end_other_tasks(0.3)

    loop = asyncio.new_event_loop()
    t = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="lapras.app"):
        ended = loop.run_until_complete(main())
    took = time.monotonic() - t
    assert not ended and took < 10  # the bound, not the stuck task, ended the wait
    assert any("stuck-one" in r.getMessage() and "_stubborn" in r.getMessage() for r in caplog.records)
    # (The loop is left unclosed: closing it would wait on the stuck task, which is the point.)
