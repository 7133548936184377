"""Cooperative cancellation: the signal a body watches and a wrapper may cancel.

Any object with asyncio.Event's `is_set()` and `wait()` is a signal here, so a harness that hands
its bodies a plain `asyncio.Event` works as is. `CancelSignal` adds what a timeout needs: a child
that is cancelled when its parent is, and can be cancelled on its own without touching the parent.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class Signal(Protocol):
    """What the kit needs of a cancellation signal (asyncio.Event has it)."""

    def is_set(self) -> bool: ...

    async def wait(self) -> Any: ...


class CancelSignal:
    """A cancellation signal, optionally linked to a parent: cancelling the parent cancels it."""

    def __init__(self, parent: Signal | None = None) -> None:
        self._own = asyncio.Event()
        self._parent = parent

    def is_set(self) -> bool:
        return self._own.is_set() or (self._parent is not None and self._parent.is_set())

    def set(self) -> None:
        """Cancel this signal (and its children), never its parent."""
        self._own.set()

    cancel = set

    async def wait(self) -> bool:
        if self._parent is None or self.is_set():
            return await self._own.wait()
        own = asyncio.ensure_future(self._own.wait())
        parent = asyncio.ensure_future(self._parent.wait())
        try:
            await asyncio.wait({own, parent}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            own.cancel()
            parent.cancel()
        return True


async def cancelled_within(signal: Signal, ms: float) -> bool:
    """Waits `ms` milliseconds or until `signal` is set, whichever comes first: True if it was."""
    if signal.is_set():
        return True
    try:
        await asyncio.wait_for(signal.wait(), ms / 1000)
    except asyncio.TimeoutError:
        pass
    return signal.is_set()
