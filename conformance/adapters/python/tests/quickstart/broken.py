"""mypipeline broken on purpose, under an adapter: `broken.py BREAKAGE ADAPTER.py`.

Each breakage is a bug a real pipeline could have. The adapter (the README's quick start) is not
changed: the kit's probes must record what the broken pipeline does, so that `tep` reports the
breakage under the invariant it breaks, not under one the probes made up.
"""

from __future__ import annotations

import runpy
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import mypipeline as mp


def guards_after_a_deny() -> None:
    """The guards go on after a deny (the first reason still wins)."""

    def consult_all(self: mp.Pipeline, call: mp.Call) -> str | None:
        reasons = [guard(call) for guard in self.guards]
        return next((r for r in reasons if r is not None), None)

    mp.Pipeline._guard = consult_all  # type: ignore[method-assign]


def listeners_reversed() -> None:
    """The waterfalls run their listeners last registered first."""
    waterfall = mp.waterfall

    async def reversed_waterfall(
        listeners: Sequence[Callable[..., Awaitable[Any]]], handed: tuple[Any, ...], default: Any
    ) -> Any:
        return await waterfall(list(reversed(listeners)), handed, default)

    mp.waterfall = reversed_waterfall


def approval_asked_twice() -> None:
    """The one-shot prompt is asked a second time, and the second answer is the one used."""
    decide = mp.Pipeline._decide

    async def ask_twice(self: mp.Pipeline, call: mp.Call) -> str | None:
        approval = self.approval
        if approval is None:
            return await decide(self, call)

        async def twice(request: mp.ApprovalRequest) -> str:
            await approval(request)
            return await approval(request)

        self.approval = twice
        try:
            return await decide(self, call)
        finally:
            self.approval = approval

    mp.Pipeline._decide = ask_twice  # type: ignore[method-assign]


def denial_skips_post() -> None:
    """A denied call goes straight to its result: post-execute never sees the denial."""

    async def no_post(self: mp.Pipeline, call: mp.Call, reason: str) -> mp.Result:
        return mp.Result.fail(reason)

    mp.Pipeline._denied = no_post  # type: ignore[method-assign]


BREAKAGES = {
    f.__name__.replace("_", "-"): f
    for f in (guards_after_a_deny, listeners_reversed, approval_asked_twice, denial_skips_post)
}

if __name__ == "__main__":
    breakage, adapter = sys.argv[1], sys.argv[2]
    BREAKAGES[breakage]()
    sys.argv[1:] = sys.argv[3:]
    runpy.run_path(adapter, run_name="__main__")
