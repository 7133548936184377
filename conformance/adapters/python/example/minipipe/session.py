"""The session log: every event the harness records, in order, for anyone subscribed."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class SessionEvent:
    seq: int
    time: int
    type: str
    data: Mapping[str, Any]
    call_id: str | None = None
    surface_op: str | None = None
    source_seqs: tuple[int, ...] = ()


class SessionLog:
    def __init__(self) -> None:
        self.events: list[SessionEvent] = []
        self._subscribers: list[Callable[[SessionEvent], object]] = []
        self._started = time.monotonic()

    def subscribe(self, subscriber: Callable[[SessionEvent], object]) -> None:
        self._subscribers.append(subscriber)

    def append(
        self,
        type: str,
        data: Mapping[str, Any],
        *,
        call_id: str | None = None,
        surface_op: str | None = None,
        source_seqs: tuple[int, ...] = (),
    ) -> SessionEvent:
        elapsed = int((time.monotonic() - self._started) * 1000)
        event = SessionEvent(len(self.events) + 1, elapsed, type, data, call_id, surface_op, source_seqs)
        self.events.append(event)
        for subscriber in self._subscribers:
            subscriber(event)
        return event
