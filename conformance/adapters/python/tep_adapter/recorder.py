"""The trace recorder: one method per moment of a harness, each appending the right record.

Call the method when the moment happens; the recorder applies the recording rules of
docs/adapter-protocol.md ("Recording the trace"):

- session events get increasing `seq` numbers from 1 and `time` in ms since the run started;
  a `tool/result` names its `tool/call` (`sourceEventSeqs`); only `tool/result` and
  `user/message` carry a surface operation;
- stages record the identity they were handed (through the dialect) and, for a Code Mode
  sub-call, its `parent`;
- the three `around` moments are three methods (`on_dispatch`, `on_body_return`,
  `on_execute_end`), never merged;
- an `approval` answer recorded by the prompt is held for one record, so the pipeline's
  `approval/decided` (logged once the prompt returned) sits inside the stage;
- an `fsGate` visit is followed by the body resuming (`toolBody`);
- listeners entered and guard verdicts are collected as the scripted parts run, and land on the
  `pre`, `post` and `guards` records; a guard consulted after the deny (or throw) that recorded
  a `guards` stage, before any other record of that call, is added to that stage's verdicts:
  that is the evidence that a guard ran after a deny;
- every event is numbered in the order it is recorded; an event from your harness's log keeps
  its own number only as a key (`seq=`): the `source_seqs` it names are translated to the
  trace's numbers, so your log's events and the recorder's helpers share one numbering;
- results go through `Dialect.result`, and every value is turned into plain JSON (mappings,
  sequences) as it is recorded.

Nothing is sorted or moved after the fact: the order of calls is the evidence.

A mistake in the adapter's glue the recorder can see (a `tool/call` whose arguments are not the
raw string, a result `Dialect.result` cannot read) is kept in `problems`: the kit then answers the
scenario `errored` with it, rather than send a trace that would be judged for the glue's fault.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal

from .dialect import Dialect
from .records import Identity, Record, ResultRecord, jsonable, text_block, texts_of
from .scenario import Json, TodoItem

Spec = Literal["rev1", "rev2"]

_UNKNOWN: Any = object()


class Recorder:
    """Appends trace records for one run (one scenario)."""

    def __init__(
        self,
        spec: Spec = "rev2",
        dialect: Dialect | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.spec: Spec = spec
        self.dialect = dialect if dialect is not None else Dialect()
        self.records: list[Record] = []
        self._clock = clock
        self._start = clock()
        self._seq = 0
        self._lock = threading.RLock()
        self._call_seqs: dict[str, int] = {}
        self._parents: dict[str, str] = {}
        self._held: dict[str, Record] = {}
        self._entered: dict[tuple[str, str], list[str]] = {}
        self._verdicts: dict[str, list[dict[str, str]]] = {}
        self._guard_chains: dict[str, Record] = {}
        self._dispatching: set[str] = set()
        self._contexts: dict[str, int] = {}
        self._harness_seqs: dict[int, int] = {}
        self._last_harness_seq: int | None = None
        self.problems: list[str] = []
        """Mistakes of the adapter's glue, in the order found (see the module docs)."""

    def problem(self, message: str) -> None:
        """Notes a mistake of the adapter's glue: the scenario is answered `errored` with it."""
        with self._lock:
            if message not in self.problems:
                self.problems.append(message)

    # -- plumbing --------------------------------------------------------------------------

    def identify(self, call: Any) -> tuple[str, Identity | None]:
        """A call id, and the identity when `call` is what a stage was handed (not a bare id)."""
        if isinstance(call, str):
            return call, None
        identity = call if isinstance(call, Identity) else self.dialect.identity(call)
        if identity.parent is not None:
            self._parents[identity.call_id] = identity.parent
        return identity.call_id, identity

    def call_id(self, call: Any) -> str:
        return self.identify(call)[0]

    def _append(self, record: Record) -> Record:
        with self._lock:
            # Any other record of a call closes the guard chain its last guards stage ended.
            self._guard_chains.pop(record.get("call"), None)  # type: ignore[arg-type]
            # A held approval stage goes right after its call's audit, else right before this.
            audit = record["kind"] == "event" and record["event"]["type"] == "approval/decided"
            after = self._held.pop(record["call"]) if audit and record.get("call") in self._held else None
            self.records.extend(self._held.values())
            self._held.clear()
            self.records.append(record)
            if after is not None:
                self.records.append(after)
            return record

    def _stage(self, node: str, call: Any = None, *, with_identity: bool = True, **fields: Json) -> Record:
        record: Record = {"kind": "stage", "node": node}
        if call is not None:
            call_id, identity = self.identify(call)
            record["call"] = call_id
            if identity is not None and with_identity:
                record["identity"] = identity.record()
        record.update((k, v) for k, v in fields.items() if v is not None)
        if call is not None and record["call"] in self._parents:
            record["parent"] = self._parents[record["call"]]
        return record

    def _result(self, result: Any) -> ResultRecord:
        """`result` as the trace records it, through `Dialect.result`. A mapping already in the
        trace's shape is still accepted when the dialect cannot read it (adapters written before
        the recorder asked the dialect first)."""
        try:
            found: Any = self.dialect.result(result)
        except Exception as error:
            if not _is_result_record(result):
                if isinstance(error, NotImplementedError):
                    self.problem(str(error))
                raise
            found = result
        record = jsonable(found)
        shape = _result_shape_problem(record)
        if shape is not None:
            self.problem(f"Dialect.result returned {shape} for a {type(result).__name__}")
        return record  # type: ignore[no-any-return]

    def now_ms(self) -> int:
        return int((self._clock() - self._start) * 1000)

    # -- session events --------------------------------------------------------------------

    def on_event(
        self,
        type: str,
        data: Mapping[str, Json],
        call: Any = None,
        *,
        surface_op: str | None = None,
        source_seqs: Sequence[int] | None = None,
        seq: int | None = None,
    ) -> int:
        """A session event, from a log that already speaks the spec's event vocabulary. Returns
        its `seq` in the trace. A `tool/call` is remembered so its `tool/result` can name it.

        `seq` is the number your log gave the event, if it numbers them: the trace numbers every
        event itself (in the order recorded, shared with the helpers below), and `source_seqs` of
        an event that has a `seq` are your log's numbers, translated to the trace's."""
        with self._lock:
            call_id = None if call is None else self.call_id(call)
            self._seq += 1
            if seq is not None:
                if self._last_harness_seq is not None and seq <= self._last_harness_seq:
                    # The trace's numbering cannot show this (it is the kit's): say it here.
                    _warn(f"your log numbered {type!r} {seq}, after {self._last_harness_seq}: not increasing")
                self._last_harness_seq = seq
                self._harness_seqs[seq] = self._seq
                if source_seqs is not None:
                    source_seqs = [self._harness_seqs.get(s, s) for s in source_seqs]
            event: dict[str, Json] = {"seq": self._seq, "time": self.now_ms(), "type": type, "data": jsonable(data)}
            if surface_op is None and type in ("tool/result", "user/message"):
                surface_op = "append"
            if surface_op is not None:
                event["surfaceOp"] = surface_op
            if source_seqs is None and type == "tool/result" and call_id in self._call_seqs:
                source_seqs = [self._call_seqs[call_id]]
            if source_seqs is not None:
                event["sourceEventSeqs"] = list(source_seqs)
            if type == "tool/call" and call_id is not None:
                self._call_seqs[call_id] = self._seq
            record: Record = {"kind": "event", "event": event}
            if call_id is not None:
                record = {"kind": "event", "call": call_id, "event": event}
            self._append(record)
            return self._seq

    def on_tool_call(self, call: Any, name: str, arguments: str, *, turn: int = 1, step: int = 1) -> int:
        """The model's call is logged (`arguments`: the raw string the model wrote)."""
        call_id = self.call_id(call)
        if not isinstance(arguments, str):
            self.problem(
                f"recorder.on_tool_call({call_id!r}, ...) was handed arguments as a {type(arguments).__name__}: "
                "a tool/call records the raw string the model wrote (run.scenario.calls[i].raw_arguments)"
            )
        data = {"turn": turn, "step": step, "callId": call_id, "name": name, "arguments": arguments}
        return self.on_event("tool/call", data, call_id)

    def on_tool_result(
        self, call: Any, result: Any, *, turn: int = 1, step: int = 1, message_id: str | None = None
    ) -> int:
        """The outcome is recorded as the call's `tool/result` (rev2 message or rev1 flat shape)."""
        call_id = self.call_id(call)
        outcome = self._result(result)
        info = outcome.get("error", {}).get("info")
        data: dict[str, Json]
        if self.spec == "rev2":
            block = {
                "type": "tool-result",
                "toolCallId": call_id,
                "content": outcome["content"],
                "isError": outcome["isError"],
            }
            message = {
                "id": message_id or f"result-{call_id}",
                "role": "user",
                "source": {"kind": "tool", "callId": call_id},
                "content": [block],
            }
            data = {"turn": turn, "step": step, "message": message}
        else:
            data = {"callId": call_id, "content": outcome["content"], "isError": outcome["isError"]}
        if info is not None:
            data["error"] = info
        if "meta" in outcome:
            data["meta"] = outcome["meta"]
        return self.on_event("tool/result", data, call_id)

    def on_context(self, call: Any, text: str, *, message_id: str | None = None) -> int:
        """A call's additional context is injected (rev2 `user/message`, rev1 `context/message`)."""
        call_id = self.call_id(call)
        n = self._contexts[call_id] = self._contexts.get(call_id, 0) + 1
        source = {"kind": "tool", "callId": call_id}
        if self.spec == "rev1":
            return self.on_event("context/message", {"content": [text_block(text)], "source": source}, call_id)
        data = {
            "id": message_id or f"context-{call_id}-{n}",
            "role": "user",
            "content": [text_block(text)],
            "source": source,
        }
        return self.on_event("user/message", data, call_id)

    def on_approval_asked(self, call: Any, tool_name: str, reason: str | None = None) -> int:
        call_id = self.call_id(call)
        data: dict[str, Json] = {"id": f"approval-{call_id}", "toolName": tool_name, "callId": call_id}
        if reason is not None:
            data["reason"] = reason
        return self.on_event("approval/asked", data, call_id)

    def on_approval_decided(self, call: Any, outcome: str) -> int:
        call_id = self.call_id(call)
        return self.on_event("approval/decided", {"id": f"approval-{call_id}", "outcome": outcome}, call_id)

    def on_fs_observed(self, call: Any, target: str, version: int | None, *, actor: str = "agent") -> int:
        """The fs tools observed a file (`version` None: it is absent)."""
        state = {"kind": "absent"} if version is None else {"kind": "present", "version": version}
        return self.on_event("fs/observed", {"target": target, "state": state, "actor": actor}, call)

    def on_todo(self, call: Any, todos: Iterable[TodoItem | Mapping[str, str]]) -> int:
        items = [t if isinstance(t, Mapping) else {"content": t.content, "status": t.status} for t in todos]
        return self.on_event("todo/write", {"todos": items}, call)

    def on_hook(
        self,
        call: Any,
        point: str,
        handler_id: str,
        decision: str,
        *,
        dialect: str = "claude-code",
        duration_ms: int = 0,
        exit_code: int | None = 0,
        turn: int = 1,
    ) -> None:
        """A hook handler ran inside the body: `hook/invoked`, then `hook/result`."""
        self.on_event("hook/invoked", {"turn": turn, "point": point, "dialect": dialect, "handlerId": handler_id}, call)
        result: dict[str, Json] = {
            "turn": turn,
            "point": point,
            "handlerId": handler_id,
            "decision": decision,
            "durationMs": duration_ms,
        }
        if exit_code is not None:
            result["exitCode"] = exit_code
        self.on_event("hook/result", result, call)

    def on_code_dispatch_start(
        self, sub_call: Any, parent: str, name: str, arguments: Json, *, root: str | None = None
    ) -> int:
        """A Code Mode sub-call actually starts (rev2 only; a no-op returning 0 in rev1)."""
        sub_id = self.call_id(sub_call)
        self._parents[sub_id] = parent
        if self.spec == "rev1":
            return 0
        data = {
            "rootCallId": root or parent,
            "parentCallId": parent,
            "subCallId": sub_id,
            "name": name,
            "arguments": arguments,
        }
        return self.on_event("tool/code-dispatch-start", data, sub_id)

    def on_code_dispatch(
        self, sub_call: Any, parent: str, name: str, arguments: Json, result: Any, *, root: str | None = None
    ) -> int:
        """A sub-call is committed (after its `tools/result`): its `tool/code-dispatch` log."""
        sub_id = self.call_id(sub_call)
        outcome = self._result(result)
        data: dict[str, Json] = {"parentCallId": parent, "subCallId": sub_id, "name": name, "arguments": arguments}
        data["isError"] = outcome["isError"]
        if self.spec == "rev2":
            data["rootCallId"] = root or parent
            data["content"] = outcome["content"]
        else:
            data["resultSummary"] = "\n".join(texts_of(outcome))[:200]
        return self.on_event("tool/code-dispatch", data, sub_id, surface_op=None)

    # -- stages, in the order a call meets them --------------------------------------------

    def on_model(self, calls: Iterable[tuple[str, str] | tuple[str, str, bool | None] | Mapping[str, Json]]) -> None:
        """The batch, in model order: (call id, tool name[, concurrency-safe]) per call. Leave the
        classification out (or None) if your pipeline does not tell."""
        declared = []
        for call in calls:
            if isinstance(call, Mapping):
                declared.append(dict(call))
                continue
            entry: dict[str, Json] = {"callId": call[0], "name": call[1]}
            if len(call) > 2 and call[2] is not None:
                entry["concurrencySafe"] = call[2]
            declared.append(entry)
        self._append({"kind": "stage", "node": "model", "calls": declared})

    def on_present_call(self, call: Any) -> None:
        """The pending card is shown."""
        self._append(self._stage("presentCall", self.call_id(call)))

    def entered(self, waterfall: Literal["pre", "post"], call: Any, listener_id: str) -> None:
        """A scripted listener was entered: it lands on the waterfall's record."""
        self._entered.setdefault((waterfall, self.call_id(call)), []).append(listener_id)

    def on_pre_execute(
        self, call: Any, outcome: str, reason: str | None = None, *, listeners: Sequence[str] | None = None
    ) -> None:
        """The `tools/pre-execute` waterfall decided (allow, deny, ask) or threw (throw)."""
        entered = self._entered.pop(("pre", self.call_id(call)), [])
        self._append(self._stage("pre", call, outcome=outcome, reason=reason, listeners=list(listeners or entered)))

    def on_approval(self, call: Any, outcome: str, reason: str | None = None) -> None:
        """The ask was resolved: allowed-once, rejected, cancelled, unavailable, or throw.

        A prompt records this as it answers, but the pipeline audits the answer
        (`approval/decided`) only once the prompt has returned, and the audit belongs inside the
        stage. So an answer is held until the next record: when that is the call's
        `approval/decided`, the stage goes right after it. A throw is never audited: it is
        recorded at once."""
        record = self._stage("approval", self.call_id(call), outcome=outcome, reason=reason)
        if outcome == "throw":
            self._append(record)
            return
        with self._lock:
            earlier = self._held.pop(record["call"], None)
            if earlier is not None:  # asked again before any other record: both answers stay
                self.records.append(earlier)
            self._held[record["call"]] = record

    def guard_verdict(self, call: Any, guard: str, verdict: str, reason: str | None = None) -> None:
        """A scripted guard gave a verdict: abstain, deny, allow (tried) or throw. A guard
        consulted after the chain's `guards` stage was recorded (at a deny or a throw), with no
        other record of the call since, is added to that stage."""
        entry = {"guard": guard, "verdict": verdict}
        if reason is not None:
            entry["reason"] = reason
        call_id = self.call_id(call)
        with self._lock:
            ended = self._guard_chains.get(call_id)
            if ended is not None:
                ended["verdicts"].append(entry)
                ended["listeners"].append(guard)
                return
            self._verdicts.setdefault(call_id, []).append(entry)

    def guards_ended(self, call: Any) -> bool:
        """Whether the call's guard chain already recorded its `guards` stage at a deny or a
        throw (and no other record of the call came since)."""
        return self.call_id(call) in self._guard_chains

    def on_guards(
        self, call: Any, outcome: str, reason: str | None = None, *, verdicts: Sequence[Mapping[str, str]] | None = None
    ) -> None:
        """The guards have run: allow, deny, or throw."""
        noted = self._verdicts.pop(self.call_id(call), [])
        found = [dict(v) for v in verdicts] if verdicts is not None else noted
        record = self._stage(
            "guards", call, outcome=outcome, reason=reason, listeners=[v["guard"] for v in found], verdicts=found
        )
        with self._lock:
            self._append(record)
            if outcome in ("deny", "throw"):
                self._guard_chains[record["call"]] = record

    def on_denied(self, call: Any, reason: str) -> None:
        """(full) The call is refused and its body skipped."""
        self._append(self._stage("denied", self.call_id(call), reason=reason))

    def on_dispatch(self, call: Any) -> None:
        """Control enters the innermost `next()` of `tools/execute` (first `around` moment)."""
        record = self._stage("around", call)
        with self._lock:
            self._append(record)
            self._dispatching.add(record["call"])

    def dispatch_pending(self, call: Any) -> bool:
        """Whether the call's last dispatch (`on_dispatch`) has not started a body yet."""
        return self.call_id(call) in self._dispatching

    def on_body_start(self, call: Any) -> None:
        """The body starts."""
        record = self._stage("toolBody", call)
        with self._lock:
            self._append(record)
            self._dispatching.discard(record["call"])

    def on_fs_gate(
        self,
        call: Any,
        intent: Literal["write", "edit"],
        target: str,
        version: int | None,
        allowed: bool,
        reason: str | None = None,
    ) -> None:
        """The fs gate decided a mutation; the body resumes after it (both are recorded)."""
        gated: dict[str, Json] = {"intent": intent, "target": target}
        if version is not None:
            gated["version"] = version
        call_id, identity = self.identify(call)
        outcome = "allow" if allowed else "deny"
        self._append(self._stage("fsGate", call_id, outcome=outcome, reason=reason, intent=gated))
        self._append(self._stage("toolBody", identity or call_id))

    def on_body_settled(self, call: Any, *, by: str = "body") -> None:
        """The body's steps ended: returned, threw, or stopped after cancellation. Record it in
        the body's `finally` (never for a body the pipeline abandoned)."""
        self._append({"kind": "mark", "call": self.call_id(call), "mark": "body-settled", "by": by})

    def on_body_return(self, call: Any, result: Any = None, *, error: BaseException | None = None) -> None:
        """The dispatch returns to the innermost wrapper with its result (second `around`
        moment), or the innermost `next()` threw (`error`)."""
        if error is not None:
            self._append(self._stage("around", call, outcome="throw", reason=_message(error)))
        else:
            self._append(self._stage("around", call, result=self._result(result)))

    def on_unprobed_return(self, call: Any) -> None:
        """A dispatch no probe saw (recorded by `on_dispatch` when its body started) returned to
        the wrappers: its body settled. The record says no more (no outcome, no result): what
        the harness made of the body's end only a probe would know."""
        self._append(self._stage("around", call))

    def on_execute_end(self, call: Any, *, error: BaseException | None = None) -> None:
        """The `tools/execute` waterfall ends (third `around` moment); `error` if a wrapper threw."""
        if error is not None:
            self._append(self._stage("around", call, outcome="throw", reason=_message(error)))
        else:
            self._append(self._stage("around", call))

    def on_post_execute(
        self,
        call: Any,
        handed: Any,
        outcome: str,
        reason: str | None = None,
        *,
        listeners: Sequence[str] | None = None,
    ) -> None:
        """The `tools/post-execute` waterfall decided (accept, block) or threw, on `handed`."""
        entered = self._entered.pop(("post", self.call_id(call)), [])
        self._append(
            self._stage(
                "post",
                call,
                outcome=outcome,
                reason=reason,
                listeners=list(listeners or entered),
                result=self._result(handed),
            )
        )

    def on_normalized(self, call: Any, reason: str) -> None:
        """(full) A throw was caught and turned into an isError result."""
        self._append(self._stage("normalized", self.call_id(call), reason=reason))

    def on_finalize(self, call: Any, candidate: Any = _UNKNOWN, *, error: BaseException | None = None) -> None:
        """finalizeContent was called with `candidate` (and threw `error`). Leave `candidate`
        out for a content-only finalizeContent: the record then has no `result`."""
        outcome, reason = ("throw", _message(error)) if error is not None else (None, None)
        result = None if candidate is _UNKNOWN else self._result(candidate)
        self._append(self._stage("finalize", call, outcome=outcome, reason=reason, result=result))

    def on_tools_result(self, call: Any, outcome: Any) -> None:
        """`tools/result` is notified with the frozen outcome (the `final` stage)."""
        self._append(self._stage("final", call, result=self._result(outcome)))

    def on_present_result(self, call: Any) -> None:
        """The completed card is shown."""
        self._append(self._stage("presentResult", self.call_id(call)))

    def on_batch_settled(self) -> None:
        """(full) Every call of the batch has its `tool/result` (`allResults`)."""
        self._append({"kind": "stage", "node": "allResults"})

    # -- marks -----------------------------------------------------------------------------

    def on_observer_settled(self, call: Any, observer_id: str, after_ms: int) -> None:
        self._append(
            {
                "kind": "mark",
                "call": self.call_id(call),
                "mark": "observer-settled",
                "by": observer_id,
                "afterMs": after_ms,
            }
        )

    def on_binding(self, sub_call: Any, rejection: Mapping[str, Json] | None = None) -> None:
        """A program's binding settled: resolved, or rejected with every field it was handed."""
        record: Record = {"kind": "mark", "call": self.call_id(sub_call), "by": "program"}
        if rejection is None:
            record["mark"] = "binding-resolved"
        else:
            record["mark"] = "binding-rejected"
            record["rejection"] = dict(rejection)
        self._append(record)

    # -- the trace -------------------------------------------------------------------------

    def trace(self) -> list[Record]:
        """Every record so far, in order (held records flushed at the end)."""
        with self._lock:
            for record in self._held.values():
                self.records.append(record)
            self._held.clear()
            return list(self.records)


def _message(error: BaseException) -> str:
    return str(error) or type(error).__name__


def _is_result_record(value: Any) -> bool:
    return isinstance(value, Mapping) and "isError" in value and "content" in value


def _result_shape_problem(record: Any) -> str | None:
    """What is wrong with a result record's shape, or None."""
    if not isinstance(record, dict):
        return f"a {type(record).__name__}, not a mapping"
    if not isinstance(record.get("isError"), bool):
        return f"isError {record.get('isError')!r} (a bool is needed)"
    content = record.get("content")
    if not isinstance(content, list) or not all(_is_block(b) for b in content):
        return (
            f'content {content!r} (a list of {{"type": "text", "text": ...}} blocks is needed; a block '
            "of another type is a mapping with a string type)"
        )
    if "additionalContexts" in record:
        contexts = record["additionalContexts"]
        if not isinstance(contexts, list) or not all(
            isinstance(c, dict) and c.get("origin") in _ORIGINS and isinstance(c.get("text"), str) for c in contexts
        ):
            return (
                f"additionalContexts {contexts!r} (a list of "
                '{"origin": "tool" | "wrapper" | "post", "text": ...} items is needed, docs/events.md)'
            )
    return None


_ORIGINS = ("tool", "wrapper", "post")


def _is_block(block: Any) -> bool:
    """A text block, or a block of another type (an image...), which tep keeps whole."""
    if not isinstance(block, dict) or not isinstance(block.get("type"), str):
        return False
    return block["type"] != "text" or isinstance(block.get("text"), str)


def _warn(message: str) -> None:
    print(f"[tep_adapter] {message}", file=sys.stderr, flush=True)
