"""The example adapter, timed: where a Python adapter's time goes, per scenario.

    TEP_CASE_TIME=split.json tep fuzz --oracle none \
        --adapter "python3 conformance/adapters/python/example/timed_adapter.py"

It serves exactly as `adapter.py` does, and at `stop` writes (to the file `$TEP_CASE_TIME`, and as
a line on stderr) how long it took from the interpreter's start to its first request, and, summed
over the scenarios it answered, their wall time, their CPU time, and the part of the wall time the
event loop spent blocked with nothing to run: the scenario's own scripted waiting (its sleeps, its
hung bodies waiting for their deadlines, its observers' work), which no adapter can cut.
"""

from __future__ import annotations

import asyncio
import json
import os
import selectors
import time
from dataclasses import asdict, dataclass
from typing import Any

import adapter as example  # the example's glue, next to this file (it puts the kit on the path)

import tep_adapter as tep
from tep_adapter.protocol import log

STARTED = time.perf_counter()


class TimedSelector(selectors.DefaultSelector):
    """A selector that adds up the time its `select` blocks: the loop had nothing to run."""

    blocked = 0.0

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        before = time.perf_counter()
        try:
            return super().select(timeout)
        finally:
            TimedSelector.blocked += time.perf_counter() - before


class TimedPolicy(asyncio.DefaultEventLoopPolicy):
    def new_event_loop(self) -> asyncio.AbstractEventLoop:
        return asyncio.SelectorEventLoop(TimedSelector())


@dataclass
class Split:
    """Seconds: to the first scenario, then summed over the scenarios."""

    scenarios: int = 0
    start_s: float = 0.0
    wall_s: float = 0.0
    cpu_s: float = 0.0
    waiting_s: float = 0.0


class TimedAdapter(tep.Adapter):
    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.split = Split()

    def run(self, raw: Any, spec: Any = "rev2") -> dict[str, Any]:
        if self.split.scenarios == 0:
            self.split.start_s = time.perf_counter() - STARTED + _interpreter_start()
        wall, cpu, blocked = time.perf_counter(), time.process_time(), TimedSelector.blocked
        try:
            return super().run(raw, spec)
        finally:
            self.split.scenarios += 1
            self.split.wall_s += time.perf_counter() - wall
            self.split.cpu_s += time.process_time() - cpu
            self.split.waiting_s += TimedSelector.blocked - blocked


def _interpreter_start() -> float:
    """Seconds from the process's start to this module's (interpreter, site, imports)."""
    try:
        with open("/proc/self/stat", encoding="ascii") as f:
            started_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime", encoding="ascii") as f:
            uptime = float(f.read().split()[0])
        ticks = os.sysconf("SC_CLK_TCK")
        return max(0.0, uptime - started_ticks / ticks - (time.perf_counter() - STARTED))
    except (OSError, ValueError, IndexError):
        return 0.0


def main() -> int:
    asyncio.set_event_loop_policy(TimedPolicy())
    timed = TimedAdapter(example.setup, example.Minipipe(), example.MINIPIPE)
    status = timed.serve()
    text = json.dumps(asdict(timed.split))
    log(f"case time: {text}")
    out = os.environ.get("TEP_CASE_TIME")
    if out:
        with open(out, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    return status


if __name__ == "__main__":
    raise SystemExit(main())
