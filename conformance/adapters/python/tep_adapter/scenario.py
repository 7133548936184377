"""Typed scenario objects, decoded from the JSON `tep` sends (docs/schemas/scenario.schema.json).

Every script is a small frozen dataclass, so an interpreter (or an adapter) can `match` on it.
Actions shared by several parts use one class: `Deny` is a pre-execute or a guard denial, `Throw`
is a throw wherever a script may throw, `Return` ends a body or a program.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

Json = Any
"""A decoded JSON value (None, bool, int, float, str, list or dict)."""


class ScenarioError(ValueError):
    """A scenario this kit cannot decode (malformed, or newer than the kit)."""


# ---------------------------------------------------------------------------------------------
# Actions


@dataclass(frozen=True)
class Pass:
    """Call `next` and return its decision (pre- and post-execute default)."""


@dataclass(frozen=True)
class Allow:
    """Pre-execute: decide allow. Guard: try to allow (a monotonic guard abstains)."""


@dataclass(frozen=True)
class Deny:
    reason: str


@dataclass(frozen=True)
class Ask:
    reason: str | None = None


@dataclass(frozen=True)
class Rewrite:
    """Try to allow the call with other arguments (identity is protected: it is an allow)."""

    arguments: Json


@dataclass(frozen=True)
class Throw:
    message: str


@dataclass(frozen=True)
class Abstain:
    """A guard's default: no verdict."""


@dataclass(frozen=True)
class AddContext:
    """Post-execute: call `next`, then add a context to its decision."""

    text: str


@dataclass(frozen=True)
class Accept:
    """Post-execute: accept, optionally replacing the content or the value, adding a context."""

    content: str | None = None
    value: Json = None
    context: str | None = None

    @property
    def replaces_value(self) -> bool:
        return self.value is not None


@dataclass(frozen=True)
class Block:
    feedback: str
    context: str | None = None


PreAction = Pass | Allow | Deny | Ask | Rewrite | Throw
GuardAction = Abstain | Deny | Allow | Throw
PostAction = Pass | AddContext | Accept | Block | Throw
ApprovalOutcome = Literal["allowed-once", "rejected", "cancelled", "unavailable"]
ApprovalAnswer = ApprovalOutcome | Throw
APPROVAL_OUTCOMES: tuple[ApprovalOutcome, ...] = ("allowed-once", "rejected", "cancelled", "unavailable")


# finalizeContent


@dataclass(frozen=True)
class Keep:
    """finalizeContent returns nothing: the content stays."""


@dataclass(frozen=True)
class Prefix:
    text: str


@dataclass(frozen=True)
class Replace:
    text: str


FinalizeAction = Keep | Prefix | Replace | Throw


# Wrappers (`tools/execute`, outermost first)


@dataclass(frozen=True)
class TimeoutWrapper:
    """At the tool's declared timeout, cancel the body's signal, wait for it, report TOOL_TIMEOUT."""


@dataclass(frozen=True)
class RetryWrapper:
    attempts: int
    delay_ms: int = 0


@dataclass(frozen=True)
class MetricsWrapper:
    """Counts dispatches; no visible effect."""


@dataclass(frozen=True)
class ContextWrapper:
    text: str
    calls: tuple[str, ...] = ()

    def applies_to(self, call_id: str) -> bool:
        return not self.calls or call_id in self.calls


@dataclass(frozen=True)
class ThrowWrapper:
    message: str
    phase: Literal["before", "after"] = "after"
    calls: tuple[str, ...] = ()

    def applies_to(self, call_id: str) -> bool:
        return not self.calls or call_id in self.calls


WrapperSpec = TimeoutWrapper | RetryWrapper | MetricsWrapper | ContextWrapper | ThrowWrapper


# Body steps


@dataclass(frozen=True)
class Sleep:
    ms: int


@dataclass(frozen=True)
class Hang:
    """Wait until cancelled, then fail as cancelled."""


@dataclass(frozen=True)
class SlowStop:
    """Wait until cancelled, keep running `ms` more (ignoring the signal), fail as cancelled."""

    ms: int


@dataclass(frozen=True)
class Read:
    path: str


@dataclass(frozen=True)
class Write:
    path: str
    content: str


@dataclass(frozen=True)
class Edit:
    path: str
    old: str
    new: str


@dataclass(frozen=True)
class ExternalWrite:
    """Another process changes the file: no gate, and the agent does not observe it."""

    path: str
    content: str


@dataclass(frozen=True)
class TodoItem:
    content: str
    status: Literal["pending", "in_progress", "completed"]


@dataclass(frozen=True)
class Todo:
    todos: tuple[TodoItem, ...]


@dataclass(frozen=True)
class Hook:
    point: str
    handler_id: str
    decision: str


@dataclass(frozen=True)
class DeferContext:
    text: str


@dataclass(frozen=True)
class FailUntilAttempt:
    attempt: int


@dataclass(frozen=True)
class Return:
    """End a body (or a program) with this value."""

    value: Json


BodyStep = (
    Sleep
    | Hang
    | SlowStop
    | Read
    | Write
    | Edit
    | ExternalWrite
    | Todo
    | Hook
    | DeferContext
    | FailUntilAttempt
    | Return
    | Throw
)


# Code Mode program steps


@dataclass(frozen=True)
class BindingCall:
    tool: str
    arguments: Json = field(default_factory=dict)
    body: tuple[BodyStep, ...] = ()
    on_reject: Literal["continue", "fail"] = "continue"


@dataclass(frozen=True)
class Call:
    """Call one tool and wait."""

    call: BindingCall


@dataclass(frozen=True)
class All:
    """Issue the calls at once and wait for all (they still run one at a time, in order)."""

    calls: tuple[BindingCall, ...]


@dataclass(frozen=True)
class CallRunCode:
    """Call `run_code` itself: programs have no such binding, so it must reject."""


@dataclass(frozen=True)
class Log:
    text: str


ProgramStep = Call | All | CallRunCode | Log | Return | Throw


# ---------------------------------------------------------------------------------------------
# The scenario

A = TypeVar("A")


@dataclass(frozen=True)
class Listener(Generic[A]):
    """A scripted listener (pre-execute, guard, post-execute): its id and per-call actions."""

    id: str
    decide: Mapping[str, A]
    default: A

    def action(self, call_id: str) -> A:
        """The action for `call_id`: its own, else the `"*"` one, else the default."""
        return self.decide.get(call_id, self.decide.get("*", self.default))


@dataclass(frozen=True)
class ApprovalSpec:
    answers: Mapping[str, ApprovalAnswer]

    def answer(self, call_id: str) -> ApprovalAnswer:
        return self.answers.get(call_id, self.answers.get("*", "rejected"))


@dataclass(frozen=True)
class ObserverSpec:
    id: str
    async_ms: int = 0
    mutate: str | None = None


@dataclass(frozen=True)
class ToolSpec:
    name: str
    concurrency_safe: bool = False
    timeout_ms: int | None = None
    finalize: FinalizeAction | None = None
    """The definition's finalizeContent; None means the definition has none."""


@dataclass(frozen=True)
class CallSpec:
    call_id: str
    tool: str
    arguments: Json = field(default_factory=dict)
    body: tuple[BodyStep, ...] = ()
    program: tuple[ProgramStep, ...] | None = None

    @property
    def raw_arguments(self) -> str:
        """The arguments as the compact JSON string the model wrote."""
        return compact_json(self.arguments)


@dataclass(frozen=True)
class Scenario:
    id: str
    description: str
    tools: tuple[ToolSpec, ...]
    calls: tuple[CallSpec, ...]
    pre: tuple[Listener[PreAction], ...] = ()
    approval: ApprovalSpec | None = None
    guards: tuple[Listener[GuardAction], ...] = ()
    wrappers: tuple[WrapperSpec, ...] = ()
    post: tuple[Listener[PostAction], ...] = ()
    observers: tuple[ObserverSpec, ...] = ()
    files: Mapping[str, str] = field(default_factory=dict)
    max_parallel: int = 10
    revisions: tuple[str, ...] = ("rev1", "rev2")
    requires: tuple[str, ...] = ()
    expect: Mapping[str, Json] = field(default_factory=dict)
    raw: Mapping[str, Json] = field(default_factory=dict, repr=False, compare=False)

    def tool(self, name: str) -> ToolSpec | None:
        return next((t for t in self.tools if t.name == name), None)

    def sub_calls(self, call: CallSpec) -> Iterator[tuple[str, BindingCall]]:
        """The binding calls of a `run_code` call's program with their ids, in submission order."""
        n = 0
        for step in call.program or ():
            group = (step.call,) if isinstance(step, Call) else step.calls if isinstance(step, All) else ()
            for binding in group:
                n += 1
                yield f"{call.call_id}:code:{n}", binding

    def bodies(self) -> dict[str, tuple[BodyStep, ...]]:
        """What each body does, by call id: the batch's calls and every Code Mode sub-call."""
        found = {c.call_id: c.body for c in self.calls}
        for call in self.calls:
            found.update((sub_id, b.body) for sub_id, b in self.sub_calls(call))
        return found

    def programs(self) -> dict[str, tuple[ProgramStep, ...]]:
        """The program of each `run_code` call, by call id."""
        return {c.call_id: c.program for c in self.calls if c.program is not None}

    @classmethod
    def from_json(cls, raw: Mapping[str, Json] | str) -> Scenario:
        return decode_scenario(json.loads(raw) if isinstance(raw, str) else raw)


def compact_json(value: Json) -> str:
    """JSON as `tep` and the model write it: no spaces."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


# ---------------------------------------------------------------------------------------------
# Decoding


def _tagged(raw: Json, where: str) -> tuple[str, Json]:
    """`"name"` or `{"name": value}`: the externally tagged form of every action."""
    if isinstance(raw, str):
        return raw, None
    if isinstance(raw, dict) and len(raw) == 1:
        ((tag, value),) = raw.items()
        return tag, value
    raise ScenarioError(f"{where}: expected a string or a one-key object, got {raw!r}")


def _str(value: Json, where: str) -> str:
    if not isinstance(value, str):
        raise ScenarioError(f"{where}: expected a string, got {value!r}")
    return value


def _int(value: Json, where: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ScenarioError(f"{where}: expected a non-negative integer, got {value!r}")
    return value


def _unknown(where: str, raw: Json) -> ScenarioError:
    return ScenarioError(f"{where}: unknown action {raw!r} (is this kit older than the scenario?)")


def decode_pre_action(raw: Json, where: str = "pre") -> PreAction:
    tag, value = _tagged(raw, where)
    if tag == "pass" and value is None:
        return Pass()
    if tag == "allow" and value is None:
        return Allow()
    if tag == "deny":
        return Deny(_str(value, where))
    if tag == "ask":
        return Ask(None if value is None else _str(value, where))
    if tag == "rewrite":
        return Rewrite(value)
    if tag == "throw":
        return Throw(_str(value, where))
    raise _unknown(where, raw)


def decode_guard_action(raw: Json, where: str = "guard") -> GuardAction:
    tag, value = _tagged(raw, where)
    if tag == "abstain" and value is None:
        return Abstain()
    if tag == "allow" and value is None:
        return Allow()
    if tag == "deny":
        return Deny(_str(value, where))
    if tag == "throw":
        return Throw(_str(value, where))
    raise _unknown(where, raw)


def decode_post_action(raw: Json, where: str = "post") -> PostAction:
    tag, value = _tagged(raw, where)
    if tag == "pass" and value is None:
        return Pass()
    if tag == "addContext":
        return AddContext(_str(value, where))
    if tag == "accept" and isinstance(value, dict):
        return Accept(value.get("content"), value.get("value"), value.get("context"))
    if tag == "block" and isinstance(value, dict):
        return Block(_str(value.get("feedback"), where), value.get("context"))
    if tag == "throw":
        return Throw(_str(value, where))
    raise _unknown(where, raw)


def decode_approval_answer(raw: Json, where: str = "approval") -> ApprovalAnswer:
    tag, value = _tagged(raw, where)
    if value is None:
        for outcome in APPROVAL_OUTCOMES:
            if tag == outcome:
                return outcome
    if tag == "throw":
        return Throw(_str(value, where))
    raise _unknown(where, raw)


def decode_finalize(raw: Json, where: str = "finalize") -> FinalizeAction:
    tag, value = _tagged(raw, where)
    if tag == "keep" and value is None:
        return Keep()
    if tag == "prefix":
        return Prefix(_str(value, where))
    if tag == "replace":
        return Replace(_str(value, where))
    if tag == "throw":
        return Throw(_str(value, where))
    raise _unknown(where, raw)


def decode_wrapper(raw: Json, where: str = "wrapper") -> WrapperSpec:
    if not isinstance(raw, dict):
        raise ScenarioError(f"{where}: expected an object with a kind, got {raw!r}")
    kind = raw.get("kind")
    calls = tuple(_str(c, where) for c in raw.get("calls", ()))
    if kind == "timeout":
        return TimeoutWrapper()
    if kind == "retry":
        return RetryWrapper(_int(raw.get("attempts"), where), _int(raw.get("delayMs", 0), where))
    if kind == "metrics":
        return MetricsWrapper()
    if kind == "context":
        return ContextWrapper(_str(raw.get("text"), where), calls)
    if kind == "throw":
        phase = raw.get("phase", "after")
        if phase not in ("before", "after"):
            raise ScenarioError(f"{where}: phase must be before or after, got {phase!r}")
        return ThrowWrapper(_str(raw.get("message"), where), phase, calls)
    raise _unknown(where, raw)


def decode_body_step(raw: Json, where: str = "body") -> BodyStep:
    tag, value = _tagged(raw, where)
    if tag == "hang" and value is None:
        return Hang()
    obj: dict[str, Json] = value if isinstance(value, dict) else {}
    if tag == "sleep":
        return Sleep(_int(value, where))
    if tag == "slowStop":
        return SlowStop(_int(value, where))
    if tag == "read":
        return Read(_str(value, where))
    if tag == "write":
        return Write(_str(obj.get("path"), where), _str(obj.get("content"), where))
    if tag == "externalWrite":
        return ExternalWrite(_str(obj.get("path"), where), _str(obj.get("content"), where))
    if tag == "edit":
        return Edit(_str(obj.get("path"), where), _str(obj.get("old"), where), _str(obj.get("new"), where))
    if tag == "todo" and isinstance(value, list):
        return Todo(tuple(TodoItem(_str(t.get("content"), where), t.get("status")) for t in value))
    if tag == "hook":
        return Hook(_str(obj.get("point"), where), _str(obj.get("handlerId"), where), _str(obj.get("decision"), where))
    if tag == "deferContext":
        return DeferContext(_str(value, where))
    if tag == "failUntilAttempt":
        return FailUntilAttempt(_int(value, where))
    if tag == "return":
        return Return(value)
    if tag == "throw":
        return Throw(_str(value, where))
    raise _unknown(where, raw)


def _body(raw: Json, where: str) -> tuple[BodyStep, ...]:
    return tuple(decode_body_step(s, f"{where} step {i + 1}") for i, s in enumerate(raw or ()))


def decode_binding_call(raw: Json, where: str) -> BindingCall:
    if not isinstance(raw, dict):
        raise ScenarioError(f"{where}: expected a binding call object, got {raw!r}")
    on_reject = raw.get("onReject", "continue")
    if on_reject not in ("continue", "fail"):
        raise ScenarioError(f"{where}: onReject must be continue or fail, got {on_reject!r}")
    return BindingCall(_str(raw.get("tool"), where), raw.get("arguments", {}), _body(raw.get("body"), where), on_reject)


def decode_program_step(raw: Json, where: str = "program") -> ProgramStep:
    tag, value = _tagged(raw, where)
    if tag == "callRunCode" and value is None:
        return CallRunCode()
    if tag == "call":
        return Call(decode_binding_call(value, where))
    if tag == "all" and isinstance(value, list):
        return All(tuple(decode_binding_call(c, where) for c in value))
    if tag == "log":
        return Log(_str(value, where))
    if tag == "return":
        return Return(value)
    if tag == "throw":
        return Throw(_str(value, where))
    raise _unknown(where, raw)


def _listeners(raw: Json, kind: str, decode: Any, default: A) -> tuple[Listener[A], ...]:
    listeners = []
    for entry in raw or ():
        lid = _str(entry.get("id"), kind)
        decide = {call: decode(action, f"{kind} {lid} for {call}") for call, action in entry.get("decide", {}).items()}
        listeners.append(Listener(lid, decide, default))
    return tuple(listeners)


def decode_scenario(raw: Mapping[str, Json]) -> Scenario:
    """Decodes a scenario object; raises ScenarioError on anything this kit does not know."""
    if not isinstance(raw, Mapping):
        raise ScenarioError(f"expected a scenario object, got {type(raw).__name__}")
    sid = _str(raw.get("id"), "scenario id")
    tools = tuple(
        ToolSpec(
            _str(t.get("name"), f"{sid}: tool"),
            t.get("concurrencySafe", False) is True,
            t.get("timeoutMs"),
            None if t.get("finalize") is None else decode_finalize(t["finalize"], f"{sid}: finalize"),
        )
        for t in raw.get("tools", ())
    )
    calls = tuple(
        CallSpec(
            _str(c.get("callId"), f"{sid}: call"),
            _str(c.get("tool"), f"{sid}: call tool"),
            c.get("arguments", {}),
            _body(c.get("body"), f"{sid}: {c.get('callId')} body"),
            None
            if c.get("program") is None
            else tuple(decode_program_step(s, f"{sid}: {c.get('callId')} program") for s in c["program"]),
        )
        for c in raw.get("calls", ())
    )
    approval = raw.get("approval")
    return Scenario(
        id=sid,
        description=raw.get("description", ""),
        tools=tools,
        calls=calls,
        pre=_listeners(raw.get("pre"), f"{sid}: pre", decode_pre_action, Pass()),
        approval=None
        if approval is None
        else ApprovalSpec(
            {k: decode_approval_answer(v, f"{sid}: approval for {k}") for k, v in approval.get("answers", {}).items()}
        ),
        guards=_listeners(raw.get("guards"), f"{sid}: guard", decode_guard_action, Abstain()),
        wrappers=tuple(decode_wrapper(w, f"{sid}: wrapper {i + 1}") for i, w in enumerate(raw.get("wrappers", ()))),
        post=_listeners(raw.get("post"), f"{sid}: post", decode_post_action, Pass()),
        observers=tuple(
            ObserverSpec(_str(o.get("id"), f"{sid}: observer"), o.get("asyncMs", 0), o.get("mutate"))
            for o in raw.get("observers", ())
        ),
        files=dict(raw.get("files", {})),
        max_parallel=max(1, raw.get("maxParallel") or 10),
        revisions=tuple(raw.get("revisions", ("rev1", "rev2"))),
        requires=tuple(raw.get("requires", ())),
        expect=raw.get("expect", {}),
        raw=raw,
    )
