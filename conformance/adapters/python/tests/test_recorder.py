"""The recorder's rules: seq and time, identity, the around moments, held and paired records."""

from __future__ import annotations

import itertools
import unittest

from tep_adapter import Recorder

from .fakes import FakeCall, FakeDialect, failed, ok


def recorder(spec: str = "rev2") -> Recorder:
    ticks = itertools.count(0, 0.004)  # a clock that moves 4 ms per reading
    return Recorder(spec, FakeDialect(), clock=lambda: next(ticks))  # type: ignore[arg-type]


class SessionEventsTest(unittest.TestCase):
    def test_seq_counts_from_one_and_time_is_ms_since_the_start(self) -> None:
        rec = recorder()
        rec.on_tool_call("c1", "read", '{"a":1}')
        rec.on_todo("c1", [{"content": "t", "status": "pending"}])
        rec.on_tool_result("c1", ok())
        events = [r["event"] for r in rec.trace()]
        self.assertEqual([e["seq"] for e in events], [1, 2, 3])
        times = [e["time"] for e in events]
        self.assertEqual(times, sorted(times))
        self.assertTrue(all(isinstance(t, int) for t in times))
        self.assertGreater(times[-1], times[0])

    def test_a_tool_result_names_its_tool_call_and_is_appended(self) -> None:
        rec = recorder()
        rec.on_tool_call("c1", "read", "{}")
        rec.on_tool_call("c2", "read", "{}")
        rec.on_tool_result("c2", failed("no"))
        event = rec.trace()[-1]["event"]
        self.assertEqual(event["sourceEventSeqs"], [2])
        self.assertEqual(event["surfaceOp"], "append")
        message = event["data"]["message"]
        self.assertEqual(message["id"], "result-c2")
        self.assertEqual(message["source"], {"kind": "tool", "callId": "c2"})
        self.assertEqual(message["content"][0]["toolCallId"], "c2")
        self.assertTrue(message["content"][0]["isError"])

    def test_an_error_code_reaches_the_tool_result(self) -> None:
        rec = recorder()
        result = failed("late")
        result["error"]["info"] = {"name": "ToolTimeoutError", "code": "TOOL_TIMEOUT"}
        rec.on_tool_result("c1", result)
        self.assertEqual(rec.trace()[0]["event"]["data"]["error"]["code"], "TOOL_TIMEOUT")

    def test_rev1_shapes(self) -> None:
        rec = recorder("rev1")
        rec.on_tool_result("c1", ok("hi"))
        rec.on_context("c1", "note")
        rec.on_code_dispatch("c1:code:1", "c1", "t", {}, ok("x" * 300))
        result, context, dispatch = (r["event"] for r in rec.trace())
        self.assertEqual(result["data"], {"callId": "c1", "content": ok("hi")["content"], "isError": False})
        self.assertEqual(context["type"], "context/message")
        self.assertNotIn("surfaceOp", context)
        self.assertEqual(len(dispatch["data"]["resultSummary"]), 200)
        self.assertNotIn("rootCallId", dispatch["data"])

    def test_contexts_are_user_messages_numbered_per_call(self) -> None:
        rec = recorder()
        rec.on_context("c1", "one")
        rec.on_context("c1", "two")
        rec.on_context("c2", "three")
        ids = [r["event"]["data"]["id"] for r in rec.trace()]
        self.assertEqual(ids, ["context-c1-1", "context-c1-2", "context-c2-1"])
        self.assertEqual(rec.trace()[0]["event"]["surfaceOp"], "append")

    def test_code_dispatch_events_are_never_model_facing(self) -> None:
        rec = recorder()
        rec.on_code_dispatch_start("c1:code:1", "c1", "t", {"a": 1})
        rec.on_code_dispatch("c1:code:1", "c1", "t", {"a": 1}, ok("done"))
        start, dispatch = (r["event"] for r in rec.trace())
        self.assertNotIn("surfaceOp", start)
        self.assertNotIn("surfaceOp", dispatch)
        self.assertEqual(dispatch["data"]["rootCallId"], "c1")
        self.assertEqual(dispatch["data"]["content"], ok("done")["content"])

    def test_a_log_in_the_spec_vocabulary_passes_through(self) -> None:
        rec = recorder()
        rec.on_event("tool/call", {"turn": 1, "step": 1, "callId": "c1", "name": "t", "arguments": "{}"}, "c1")
        rec.on_event("tool/result", {"turn": 1, "step": 1, "message": {}}, "c1")
        rec.on_event("todo/write", {"todos": []}, "c1")
        _, result, todo = (r["event"] for r in rec.trace())
        self.assertEqual((result["sourceEventSeqs"], result["surfaceOp"]), ([1], "append"))
        self.assertNotIn("surfaceOp", todo)

    def test_owned_events(self) -> None:
        rec = recorder()
        rec.on_fs_observed("c1", "a.txt", 3)
        rec.on_fs_observed("c1", "b.txt", None)
        rec.on_hook("c1", "PostToolUse", "lint", "pass")
        seen, absent, invoked, result = (r["event"]["data"] for r in rec.trace())
        self.assertEqual(seen, {"target": "a.txt", "state": {"kind": "present", "version": 3}, "actor": "agent"})
        self.assertEqual(absent["state"], {"kind": "absent"})
        self.assertEqual(invoked["dialect"], "claude-code")
        self.assertEqual((result["decision"], result["durationMs"]), ("pass", 0))


class StagesTest(unittest.TestCase):
    def test_stages_record_the_identity_they_were_handed(self) -> None:
        rec = recorder()
        call = FakeCall("c1", "grep", {"pattern": "x", "paths": ("a", "b")}, token="tok-7")
        rec.on_pre_execute(call, "allow")
        pre = rec.trace()[0]
        identity = {
            "token": "tok-7",
            "callId": "c1",
            "name": "grep",
            "arguments": {"pattern": "x", "paths": ["a", "b"]},
        }
        self.assertEqual(pre["identity"], identity)
        self.assertEqual((pre["call"], pre["outcome"]), ("c1", "allow"))
        self.assertNotIn("parent", pre)

    def test_a_sub_call_names_its_parent_on_every_stage(self) -> None:
        rec = recorder()
        parent = FakeCall("c1", "run_code", token="tok-1")
        sub = FakeCall("c1:code:1", "t", token="tok-2", parent=parent)
        rec.on_pre_execute(sub, "deny", "no")
        rec.on_denied("c1:code:1", "no")  # by id alone: the parent is remembered
        pre, denied = rec.trace()
        self.assertEqual(pre["identity"]["parentToken"], "tok-1")
        self.assertEqual(pre["parent"], "c1")
        self.assertEqual(denied["parent"], "c1")
        self.assertNotIn("identity", denied)

    def test_the_three_around_moments_stay_three_records(self) -> None:
        rec = recorder()
        call = FakeCall("c1")
        rec.on_dispatch(call)
        rec.on_body_start(call)
        rec.on_body_settled(call)
        rec.on_body_return(call, ok("done"))
        rec.on_execute_end(call, error=ValueError("metrics sink failed"))
        dispatch, body, settled, back, end = rec.trace()
        self.assertEqual(
            [dispatch["node"], body["node"], back["node"], end["node"]], ["around", "toolBody"] + ["around"] * 2
        )
        self.assertNotIn("result", dispatch)
        self.assertEqual(settled, {"kind": "mark", "call": "c1", "mark": "body-settled", "by": "body"})
        self.assertEqual(back["result"], ok("done"))
        self.assertEqual((end["outcome"], end["reason"]), ("throw", "metrics sink failed"))

    def test_an_innermost_throw_is_an_around_throw(self) -> None:
        rec = recorder()
        rec.on_body_return(FakeCall("c1"), error=RuntimeError("escaped the body"))
        self.assertEqual(rec.trace()[0]["outcome"], "throw")

    def test_the_approval_stage_waits_for_its_audit(self) -> None:
        rec = recorder()
        rec.on_approval_asked("c1", "rm", "sure?")
        rec.on_approval("c1", "rejected")  # the prompt answers; the pipeline then audits it
        rec.on_approval_decided("c1", "rejected")
        kinds = [r.get("node") or r["event"]["type"] for r in rec.trace()]
        self.assertEqual(kinds, ["approval/asked", "approval/decided", "approval"])

    def test_an_unaudited_approval_waits_for_one_record_only(self) -> None:
        rec = recorder()
        rec.on_approval("c1", "allowed-once")
        rec.on_tool_call("c2", "x", "{}")  # anything else: the stage goes first
        rec.on_approval("c3", "rejected")
        self.assertEqual(
            [r.get("node") or r["event"]["type"] for r in rec.trace()], ["approval", "tool/call", "approval"]
        )

    def test_a_thrown_approval_is_recorded_at_once(self) -> None:
        rec = recorder()
        rec.on_approval("c1", "throw", "prompt crashed")
        rec.on_tool_call("c2", "x", "{}")
        rec.on_approval_decided("c1", "rejected")  # (a broken pipeline's audit: not moved)
        self.assertEqual(
            [r.get("node") or r["event"]["type"] for r in rec.trace()], ["approval", "tool/call", "approval/decided"]
        )

    def test_the_body_resumes_after_the_fs_gate(self) -> None:
        rec = recorder()
        rec.on_fs_gate(FakeCall("c1"), "edit", "a.txt", 2, False, "not read")
        gate, resumed = rec.trace()
        self.assertEqual(gate["intent"], {"intent": "edit", "target": "a.txt", "version": 2})
        self.assertEqual((gate["outcome"], gate["reason"]), ("deny", "not read"))
        self.assertEqual(resumed["node"], "toolBody")
        self.assertIn("identity", resumed)
        rec.on_fs_gate("c1", "write", "new.txt", None, True)
        self.assertNotIn("version", rec.trace()[2]["intent"])

    def test_waterfall_listeners_are_collected_per_call(self) -> None:
        rec = recorder()
        rec.entered("pre", "c1", "first")
        rec.entered("pre", "c2", "other")
        rec.entered("pre", "c1", "second")
        rec.on_pre_execute(FakeCall("c1"), "deny", "no")
        self.assertEqual(rec.trace()[0]["listeners"], ["first", "second"])
        rec.on_post_execute(FakeCall("c1"), ok(), "accept")
        self.assertEqual(rec.trace()[1]["listeners"], [])

    def test_guard_verdicts_land_on_the_guards_record(self) -> None:
        rec = recorder()
        rec.guard_verdict("c1", "quiet", "abstain")
        rec.guard_verdict("c1", "owner", "deny", "read-only")
        rec.on_guards(FakeCall("c1"), "deny", "read-only")
        guards = rec.trace()[0]
        self.assertEqual(guards["listeners"], ["quiet", "owner"])
        self.assertEqual(guards["verdicts"][1], {"guard": "owner", "verdict": "deny", "reason": "read-only"})

    def test_the_batch_and_its_cards(self) -> None:
        rec = recorder()
        rec.on_model([("c1", "read", True), ("c2", "write", None), ("c3", "rm")])
        rec.on_present_call("c1")
        rec.on_batch_settled()
        model, card, settled = rec.trace()
        self.assertEqual(
            model["calls"],
            [{"callId": "c1", "name": "read", "concurrencySafe": True}, {"callId": "c2", "name": "write"}]
            + [{"callId": "c3", "name": "rm"}],
        )
        self.assertEqual(card, {"kind": "stage", "node": "presentCall", "call": "c1"})
        self.assertEqual(settled, {"kind": "stage", "node": "allResults"})

    def test_marks(self) -> None:
        rec = recorder()
        rec.on_observer_settled("c1", "telemetry", 500)
        rec.on_binding("c1:code:1")
        rec.on_binding("c1:code:2", {"toolName": "rm", "message": "no"})
        observer, resolved, rejected = rec.trace()
        self.assertEqual((observer["by"], observer["afterMs"]), ("telemetry", 500))
        self.assertEqual((resolved["mark"], resolved["by"]), ("binding-resolved", "program"))
        self.assertEqual(rejected["rejection"], {"toolName": "rm", "message": "no"})


if __name__ == "__main__":
    unittest.main()
