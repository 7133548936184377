"""An in-memory, versioned workspace and the agent's fs tools.

Reads are observed (`fs/observed`); every mutation passes the `fs/write-intent` /
`fs/edit-intent` gate, which refuses to touch an existing file the agent has not read at its
current version (read-before-edit).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from .results import ToolError
from .session import SessionLog

if TYPE_CHECKING:
    from .pipeline import ToolCall


class IntentRefused(ToolError):
    """The fs gate refused a mutation."""


@dataclass(frozen=True)
class Intent:
    kind: Literal["write", "edit"]
    target: str
    version: int | None
    """The file's version on disk when gated; None for a missing file."""
    call: ToolCall


GateWatcher = Callable[[Intent, "str | None"], None]
"""Sees each gate decision: the intent and the refusal (None when allowed)."""


class Workspace:
    """The files every actor shares. Writes here are another process's: the agent does not
    observe them."""

    def __init__(self, files: Mapping[str, str] | None = None) -> None:
        self._files: dict[str, tuple[str, int]] = {}
        self._versions = 0
        for path, content in (files or {}).items():
            self.put(path, content)

    def put(self, path: str, content: str) -> int:
        self._versions += 1
        self._files[path] = (content, self._versions)
        return self._versions

    def get(self, path: str) -> tuple[str, int] | None:
        return self._files.get(path)

    def snapshot(self) -> dict[str, str]:
        return {path: content for path, (content, _) in self._files.items()}


class AgentFs:
    """The agent's fs tools over a workspace: what it read, and the intent gate."""

    def __init__(self, workspace: Workspace, session: SessionLog) -> None:
        self.workspace = workspace
        self._session = session
        self._seen: dict[str, int] = {}
        self._watchers: list[GateWatcher] = []

    def watch(self, watcher: GateWatcher) -> None:
        self._watchers.append(watcher)

    def _observed(self, call: ToolCall, path: str, version: int | None) -> None:
        state = {"kind": "absent"} if version is None else {"kind": "present", "version": version}
        self._session.append("fs/observed", {"target": path, "state": state, "actor": "agent"}, call_id=call.call_id)

    def read(self, call: ToolCall, path: str) -> str:
        found = self.workspace.get(path)
        self._observed(call, path, None if found is None else found[1])
        if found is None:
            raise ToolError(f"no such file: {path}")
        self._seen[path] = found[1]
        return found[0]

    def _refusal(self, intent: Intent) -> str | None:
        if intent.version is None:
            return f"fs/edit-intent refused: {intent.target} does not exist" if intent.kind == "edit" else None
        seen = self._seen.get(intent.target)
        if seen is None:
            return f"fs/{intent.kind}-intent refused: {intent.target} has not been read"
        if seen != intent.version:
            return f"fs/{intent.kind}-intent refused: {intent.target} changed since it was read"
        return None

    def _gate(self, call: ToolCall, kind: Literal["write", "edit"], path: str) -> None:
        found = self.workspace.get(path)
        intent = Intent(kind, path, None if found is None else found[1], call)
        refusal = self._refusal(intent)
        for watcher in self._watchers:
            watcher(intent, refusal)
        if refusal is not None:
            raise IntentRefused(refusal)

    def _commit(self, call: ToolCall, path: str, content: str) -> None:
        version = self.workspace.put(path, content)
        self._seen[path] = version
        self._observed(call, path, version)

    def write(self, call: ToolCall, path: str, content: str) -> None:
        self._gate(call, "write", path)
        self._commit(call, path, content)

    def edit(self, call: ToolCall, path: str, old: str, new: str) -> None:
        self._gate(call, "edit", path)
        found = self.workspace.get(path)
        if found is None or old not in found[0]:
            raise ToolError(f"text to replace not found in {path}")
        self._commit(call, path, found[0].replace(old, new, 1))


class BoundFs:
    """The fs tools as one call's body sees them."""

    def __init__(self, fs: AgentFs, call: ToolCall) -> None:
        self._fs = fs
        self._call = call

    def read(self, path: str) -> str:
        return self._fs.read(self._call, path)

    def write(self, path: str, content: str) -> None:
        self._fs.write(self._call, path, content)

    def edit(self, path: str, old: str, new: str) -> None:
        self._fs.edit(self._call, path, old, new)
