"""millimcp.session.inflight: the calls of one session or connection, and what cancels them."""

from __future__ import annotations

import asyncio

from millimcp.protocol import decode_message
from millimcp.session.inflight import Call, InFlight, cancelled_id


async def test_cancel_stops_the_call_and_forgets_it_at_once() -> None:
    inflight = InFlight()
    task = asyncio.ensure_future(asyncio.sleep(3600))
    call = Call(task)
    inflight.add(7, call)
    assert 7 in inflight
    assert len(inflight) == 1
    inflight.cancel(7)
    assert 7 not in inflight  # a task cancelled before it ran would never forget it
    assert call.cancelled
    assert call.abandoned
    await asyncio.sleep(0)
    assert task.cancelled()


async def test_unknown_ids_and_finished_calls_change_nothing() -> None:
    inflight = InFlight()
    inflight.cancel(None)
    inflight.cancel("nobody")
    done = asyncio.ensure_future(asyncio.sleep(0))
    await done
    call = Call(done)
    inflight.add(1, call)
    inflight.cancel(1)
    assert not call.cancelled


async def test_discard_forgets_only_the_same_call() -> None:
    inflight = InFlight()
    first, second = Call(), Call()
    inflight.add(1, first)
    inflight.add(1, second)  # the id was reused after the first was cancelled
    inflight.discard(1, first)
    assert 1 in inflight
    inflight.discard(1, second)
    assert 1 not in inflight


async def test_cancel_all_and_tasks() -> None:
    inflight = InFlight()
    tasks = [asyncio.ensure_future(asyncio.sleep(3600)) for _ in range(3)]
    for number, task in enumerate(tasks):
        inflight.add(number, Call(task))
    inflight.add(9, Call())  # not started yet: no task
    assert inflight.tasks() == tasks
    assert list(inflight) != []
    inflight.cancel_all()
    await asyncio.sleep(0)
    assert all(task.cancelled() for task in tasks)


def test_cancelled_id_reads_the_request_id_leniently() -> None:
    def note(params: str) -> object:
        message = decode_message(
            f'{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{params}}}'.encode()
        )
        return cancelled_id(message)

    assert note('{"requestId":5,"reason":"no"}') == 5
    assert note('{"requestId":"a"}') == "a"
    assert note("{}") is None
    assert note('{"requestId":[1]}') is None  # malformed: changes nothing
