"""Decoding scenarios into typed objects."""

from __future__ import annotations

import json
import unittest
from pathlib import Path

from tep_adapter import ScenarioError, decode_scenario
from tep_adapter import scenario as sc

from .fakes import scenario

CORPUS = Path(__file__).resolve().parents[3] / "scenarios"


class ActionsTest(unittest.TestCase):
    def test_pre_actions(self) -> None:
        cases = {
            '"pass"': sc.Pass(),
            '"allow"': sc.Allow(),
            '{"deny": "no"}': sc.Deny("no"),
            '{"ask": null}': sc.Ask(None),
            '{"ask": "sure?"}': sc.Ask("sure?"),
            '{"rewrite": {"path": "/tmp/x"}}': sc.Rewrite({"path": "/tmp/x"}),
            '{"throw": "boom"}': sc.Throw("boom"),
        }
        for raw, expected in cases.items():
            self.assertEqual(sc.decode_pre_action(json.loads(raw)), expected, raw)

    def test_guard_actions(self) -> None:
        cases = {'"abstain"': sc.Abstain(), '"allow"': sc.Allow(), '{"deny": "no"}': sc.Deny("no")}
        cases['{"throw": "down"}'] = sc.Throw("down")
        for raw, expected in cases.items():
            self.assertEqual(sc.decode_guard_action(json.loads(raw)), expected, raw)

    def test_post_actions(self) -> None:
        cases = {
            '"pass"': sc.Pass(),
            '{"addContext": "note"}': sc.AddContext("note"),
            '{"accept": {}}': sc.Accept(),
            '{"accept": {"content": "c", "context": "x"}}': sc.Accept(content="c", context="x"),
            '{"accept": {"value": {"size": 2}}}': sc.Accept(value={"size": 2}),
            '{"block": {"feedback": "f"}}': sc.Block("f"),
            '{"block": {"feedback": "f", "context": "why"}}': sc.Block("f", "why"),
            '{"throw": "boom"}': sc.Throw("boom"),
        }
        for raw, expected in cases.items():
            self.assertEqual(sc.decode_post_action(json.loads(raw)), expected, raw)
        self.assertTrue(sc.Accept(value=0).replaces_value)
        self.assertFalse(sc.Accept(content="c").replaces_value)

    def test_approval_answers(self) -> None:
        for outcome in ("allowed-once", "rejected", "cancelled", "unavailable"):
            self.assertEqual(sc.decode_approval_answer(outcome), outcome)
        self.assertEqual(sc.decode_approval_answer({"throw": "crash"}), sc.Throw("crash"))

    def test_finalize_actions(self) -> None:
        self.assertEqual(sc.decode_finalize("keep"), sc.Keep())
        self.assertEqual(sc.decode_finalize({"prefix": "> "}), sc.Prefix("> "))
        self.assertEqual(sc.decode_finalize({"replace": "r"}), sc.Replace("r"))
        self.assertEqual(sc.decode_finalize({"throw": "t"}), sc.Throw("t"))

    def test_wrappers(self) -> None:
        self.assertEqual(sc.decode_wrapper({"kind": "timeout"}), sc.TimeoutWrapper())
        self.assertEqual(sc.decode_wrapper({"kind": "retry", "attempts": 3}), sc.RetryWrapper(3, 0))
        self.assertEqual(sc.decode_wrapper({"kind": "retry", "attempts": 2, "delayMs": 5}), sc.RetryWrapper(2, 5))
        self.assertEqual(sc.decode_wrapper({"kind": "metrics"}), sc.MetricsWrapper())
        self.assertEqual(
            sc.decode_wrapper({"kind": "context", "text": "t", "calls": ["c2"]}), sc.ContextWrapper("t", ("c2",))
        )
        # The phase defaults to after, like the schema's.
        self.assertEqual(sc.decode_wrapper({"kind": "throw", "message": "m"}), sc.ThrowWrapper("m", "after", ()))
        self.assertEqual(
            sc.decode_wrapper({"kind": "throw", "message": "m", "phase": "before"}), sc.ThrowWrapper("m", "before")
        )
        self.assertTrue(sc.ContextWrapper("t").applies_to("anything"))
        self.assertFalse(sc.ContextWrapper("t", ("c2",)).applies_to("c1"))

    def test_body_steps(self) -> None:
        cases = {
            '{"sleep": 20}': sc.Sleep(20),
            '"hang"': sc.Hang(),
            '{"slowStop": 250}': sc.SlowStop(250),
            '{"read": "a"}': sc.Read("a"),
            '{"write": {"path": "a", "content": "x"}}': sc.Write("a", "x"),
            '{"edit": {"path": "a", "old": "x", "new": "y"}}': sc.Edit("a", "x", "y"),
            '{"externalWrite": {"path": "a", "content": "z"}}': sc.ExternalWrite("a", "z"),
            '{"todo": [{"content": "t", "status": "pending"}]}': sc.Todo((sc.TodoItem("t", "pending"),)),
            '{"hook": {"point": "P", "handlerId": "h", "decision": "pass"}}': sc.Hook("P", "h", "pass"),
            '{"deferContext": "later"}': sc.DeferContext("later"),
            '{"failUntilAttempt": 3}': sc.FailUntilAttempt(3),
            '{"return": {"size": 1}}': sc.Return({"size": 1}),
            '{"throw": "disk full"}': sc.Throw("disk full"),
        }
        for raw, expected in cases.items():
            self.assertEqual(sc.decode_body_step(json.loads(raw)), expected, raw)

    def test_program_steps(self) -> None:
        call = {"tool": "rm", "arguments": {"p": 1}, "body": [{"return": "x"}], "onReject": "fail"}
        expected = sc.BindingCall("rm", {"p": 1}, (sc.Return("x"),), "fail")
        self.assertEqual(sc.decode_program_step({"call": call}), sc.Call(expected))
        self.assertEqual(
            sc.decode_program_step({"all": [{"tool": "a"}, {"tool": "b"}]}),
            sc.All((sc.BindingCall("a"), sc.BindingCall("b"))),
        )
        self.assertEqual(sc.decode_program_step("callRunCode"), sc.CallRunCode())
        self.assertEqual(sc.decode_program_step({"log": "l"}), sc.Log("l"))
        self.assertEqual(sc.decode_program_step({"return": 1}), sc.Return(1))
        self.assertEqual(sc.decode_program_step({"throw": "t"}), sc.Throw("t"))

    def test_unknown_actions_name_where_they_are(self) -> None:
        with self.assertRaisesRegex(ScenarioError, "pre p1 for c1: unknown action 'maybe'"):
            decode_scenario(scenario(pre=[{"id": "p1", "decide": {"c1": "maybe"}}]))
        with self.assertRaisesRegex(ScenarioError, "body step 1"):
            decode_scenario(scenario(calls=[{"callId": "c1", "tool": "tool", "body": [{"teleport": 1}]}]))


class ScenarioTest(unittest.TestCase):
    def test_a_listener_action_is_its_own_then_the_wildcard_then_the_default(self) -> None:
        s = decode_scenario(scenario(pre=[{"id": "p", "decide": {"c1": {"deny": "one"}, "*": "allow"}}]))
        listener = s.pre[0]
        self.assertEqual(listener.action("c1"), sc.Deny("one"))
        self.assertEqual(listener.action("c9"), sc.Allow())
        bare = decode_scenario(scenario(guards=[{"id": "g"}])).guards[0]
        self.assertEqual(bare.action("c1"), sc.Abstain())

    def test_an_unlisted_approval_is_rejected(self) -> None:
        s = decode_scenario(scenario(approval={"answers": {"c1": "allowed-once"}}))
        assert s.approval is not None
        self.assertEqual(s.approval.answer("c1"), "allowed-once")
        self.assertEqual(s.approval.answer("c2"), "rejected")
        self.assertIsNone(decode_scenario(scenario()).approval)

    def test_sub_calls_are_numbered_in_submission_order_across_groups(self) -> None:
        program = [
            {"call": {"tool": "a", "body": [{"return": 1}]}},
            {"log": "between"},
            {"all": [{"tool": "b"}, {"tool": "c", "body": [{"throw": "x"}]}]},
        ]
        s = decode_scenario(scenario(calls=[{"callId": "r", "tool": "run_code", "program": program}]))
        self.assertEqual([i for i, _ in s.sub_calls(s.calls[0])], ["r:code:1", "r:code:2", "r:code:3"])
        bodies = s.bodies()
        self.assertEqual(bodies["r:code:1"], (sc.Return(1),))
        self.assertEqual(bodies["r:code:3"], (sc.Throw("x"),))
        self.assertIn("r", s.programs())

    def test_arguments_are_sent_as_compact_json(self) -> None:
        s = decode_scenario(scenario(calls=[{"callId": "c1", "tool": "t", "arguments": {"a": [1, 2], "b": "é"}}]))
        self.assertEqual(s.calls[0].raw_arguments, '{"a":[1,2],"b":"é"}')

    def test_defaults(self) -> None:
        s = decode_scenario(scenario(tools=[{"name": "t", "concurrencySafe": True, "timeoutMs": 50}]))
        self.assertEqual(s.tools[0], sc.ToolSpec("t", True, 50, None))
        self.assertEqual(s.max_parallel, 10)
        self.assertEqual(decode_scenario(scenario(maxParallel=2)).max_parallel, 2)

    @unittest.skipUnless(CORPUS.is_dir(), "the corpus is not next to this kit (installed elsewhere)")
    def test_every_corpus_scenario_decodes(self) -> None:
        files = sorted(CORPUS.glob("*.json"))
        self.assertGreater(len(files), 50)
        for path in files:
            with self.subTest(path.name):
                decoded = decode_scenario(json.loads(path.read_text(encoding="utf-8")))
                self.assertEqual(decoded.id, path.stem)


if __name__ == "__main__":
    unittest.main()
