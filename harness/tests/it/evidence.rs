//! What tep's own records show beyond the trace: each of the four judged invariants caught on a
//! planted run, and silent where the records prove nothing (a tie on the log's clock, a body
//! the harness gave up on, a body no record names beyond doubt, a deny a listener undid); then
//! a real run of the harness from source, which holds, and its records tampered with, each
//! tampering caught.

use std::collections::BTreeMap;

use serde_json::{Value, json};
use tep_check::invariants::InvariantId;
use tep_conformance::scenario::BodyStep;
use tep_harness::evidence::{RunRecords, breaches};
use tep_harness::hook::HookRecord;
use tep_harness::mcp::BodyRecord;
use tep_harness::script::{RunScript, ScriptedCall};

use crate::script;
use tep_model::identity::CallId;
use tep_model::trace::TraceRecord;

/// A call of `tool`; `safe` ones are played by the shipped safe tool (found by their query).
fn call(id: &str, tool: &str, arguments: Value, safe: bool, body: Vec<BodyStep>) -> ScriptedCall {
    ScriptedCall {
        call_id: id.to_owned(),
        tool: tool.to_owned(),
        model_name: if safe { "web_search" } else { tool }.to_owned(),
        arguments,
        body,
        query: safe.then(|| format!("tep {id}")),
    }
}

/// The trace of a batch: each call's `tool/call`, then each result (`(call, isError, text)`),
/// then the `approval/decided` events given.
fn trace(results: &[(&str, bool, &str)], approvals: &[(&str, &str)]) -> Vec<TraceRecord> {
    let mut lines = vec![json!({"kind": "header", "spec": "rev2", "observation": "boundary"})];
    for (i, (id, _, _)) in results.iter().enumerate() {
        // As the log's reader makes them: the call named in the data only.
        lines.push(json!({"kind": "event", "event": {"seq": i, "time": 0,
            "type": "tool/call", "data": {"turn": 1, "step": 1, "callId": id, "name": "read",
            "arguments": "{}"}}}));
    }
    for (i, (id, is_error, text)) in results.iter().enumerate() {
        lines.push(json!({"kind": "event", "event": {"seq": 10 + i, "time": 0,
            "type": "tool/result", "data": {"turn": 1, "step": 1, "message": {
                "id": format!("result-{id}"), "role": "user",
                "source": {"kind": "tool", "callId": id},
                "content": [{"type": "tool-result", "toolCallId": id,
                    "content": [{"type": "text", "text": text}], "isError": is_error}]}}}}));
    }
    for (i, (id, outcome)) in approvals.iter().enumerate() {
        lines.push(
            json!({"kind": "event", "call": id, "event": {"seq": 20 + i, "time": 0,
            "type": "approval/decided", "data": {"id": format!("approval-{id}"),
            "outcome": outcome}}}),
        );
    }
    lines
        .into_iter()
        .map(|l| serde_json::from_value(l).unwrap())
        .collect()
}

/// A body's start and end records (`end: None`: dropped, its outcome unknown).
fn body(id: &str, arguments: Option<Value>, start: f64, end: f64, ended: bool) -> [BodyRecord; 2] {
    let record = |event: &str, wall_ms: f64, is_error: Option<bool>| BodyRecord {
        wall_ms,
        event: event.to_owned(),
        call: Some(id.to_owned()),
        tool: "read".to_owned(),
        is_error,
        arguments: arguments.clone(),
    };
    [
        record("start", start, None),
        record("end", end, ended.then_some(false)),
    ]
}

fn hook(event: &str, id: &str, wall_ms: f64, stdout: Value) -> HookRecord {
    HookRecord {
        wall_ms,
        event: event.to_owned(),
        call: Some(id.to_owned()),
        payload: Value::Null,
        stdout: stdout.to_string(),
        exit: 0,
    }
}

struct Run {
    script: RunScript,
    trace: Vec<TraceRecord>,
    results_at: BTreeMap<CallId, f64>,
    bodies: Vec<BodyRecord>,
    hooks: Vec<HookRecord>,
}

impl Run {
    fn new(script: RunScript, trace: Vec<TraceRecord>, bodies: Vec<[BodyRecord; 2]>) -> Run {
        Run {
            script,
            trace,
            results_at: BTreeMap::new(),
            bodies: bodies.into_iter().flatten().collect(),
            hooks: Vec::new(),
        }
    }

    /// The invariants breached, with the call and witness line of each.
    fn breached(&self) -> Vec<(InvariantId, String, usize)> {
        breaches(&RunRecords {
            trace: &self.trace,
            results_at: &self.results_at,
            log_tick_ms: 1.0,
            bodies: &self.bodies,
            hooks: &self.hooks,
            script: &self.script,
        })
        .into_iter()
        .map(|v| {
            (
                v.invariant,
                v.call.map(|c| c.as_str().to_owned()).unwrap_or_default(),
                v.lines[0],
            )
        })
        .collect()
    }
}

fn ok(id: &str) -> (&str, bool, &str) {
    (id, false, "ok")
}

#[test]
fn an_exclusive_body_overlapping_another_is_caught_and_safe_ones_may_overlap() {
    let calls = vec![
        call("c1", "read", json!({"n": 1}), false, vec![]),
        call("c2", "rm", json!({}), false, vec![]),
        call("s1", "search", json!({}), true, vec![]),
        call("s2", "search", json!({}), true, vec![]),
    ];
    let trace = trace(&[ok("c1"), ok("c2"), ok("s1"), ok("s2")], &[]);
    let none = None;
    // One after the other, and two safe bodies at once: nothing.
    let apart = Run::new(
        script(calls.clone(), None),
        trace.clone(),
        vec![
            body("c1", none.clone(), 100.0, 200.0, true),
            body("c2", none.clone(), 200.5, 300.0, true),
            body("s1", none.clone(), 400.0, 500.0, true),
            body("s2", none.clone(), 410.0, 520.0, true),
        ],
    );
    assert_eq!(apart.breached(), []);
    // c2 starts while c1 runs: c1 is named, at its `tool/call` (line 2).
    let overlapping = Run::new(
        script(calls.clone(), None),
        trace.clone(),
        vec![
            body("c1", none.clone(), 100.0, 200.0, true),
            body("c2", none.clone(), 150.0, 300.0, true),
        ],
    );
    assert_eq!(
        overlapping.breached(),
        [(InvariantId::OnlySafeBodiesOverlap, "c1".to_owned(), 2)]
    );
    // A safe body during an exclusive one: the exclusive one is named.
    let mixed = Run::new(
        script(calls, None),
        trace,
        vec![
            body("s1", none.clone(), 100.0, 200.0, true),
            body("c2", none, 150.0, 300.0, true),
        ],
    );
    assert_eq!(
        mixed.breached(),
        [(InvariantId::OnlySafeBodiesOverlap, "c2".to_owned(), 3)]
    );
}

#[test]
fn a_dropped_body_counts_only_at_its_start() {
    let calls = vec![
        call("s1", "search", json!({}), true, vec![]),
        call("c1", "read", json!({}), false, vec![]),
    ];
    // s1 was dropped (a timeout): the server noticed at 400, long after the harness moved on.
    let run = Run::new(
        script(calls, None),
        trace(&[("s1", true, "Error: timed out"), ok("c1")], &[]),
        vec![
            body("s1", None, 100.0, 400.0, false),
            body("c1", None, 300.0, 350.0, true),
        ],
    );
    assert_eq!(run.breached(), []);
}

#[test]
fn more_safe_bodies_at_once_than_the_cap_is_caught() {
    let calls: Vec<ScriptedCall> = (1..=3)
        .map(|i| call(&format!("s{i}"), "search", json!({}), true, vec![]))
        .collect();
    let results = [ok("s1"), ok("s2"), ok("s3")];
    let bodies = || {
        vec![
            body("s1", None, 100.0, 300.0, true),
            body("s2", None, 110.0, 300.0, true),
            body("s3", None, 120.0, 300.0, true),
        ]
    };
    let capped = |cap| Run::new(script(calls.clone(), cap), trace(&results, &[]), bodies());
    assert_eq!(
        capped(Some(2)).breached(),
        [(InvariantId::PoolCap, "s3".to_owned(), 4)]
    );
    assert_eq!(capped(Some(3)).breached(), []);
    // No cap configured: the harness's own is not known.
    assert_eq!(capped(None).breached(), []);
}

#[test]
fn a_denied_calls_body_is_caught_whichever_way_it_was_denied() {
    let calls = vec![
        call("c1", "read", json!({"n": 1}), false, vec![]),
        call("c2", "read", json!({"n": 2}), false, vec![]),
    ];
    let args = |n| Some(json!({ "n": n }));
    // The approval decided `unavailable` (headless), yet c1's body ran.
    let unavailable = Run::new(
        script(calls.clone(), None),
        trace(
            &[("c1", true, "Error: requires approval"), ok("c2")],
            &[("c1", "unavailable")],
        ),
        vec![body("c1", args(1), 100.0, 110.0, true)],
    );
    assert_eq!(
        unavailable.breached(),
        [(InvariantId::DenySkipsBody, "c1".to_owned(), 4)]
    );
    // Our pre hook denied c2 with a reason its error result carries.
    let deny = json!({"hookSpecificOutput": {"hookEventName": "PreToolUse",
        "permissionDecision": "deny", "permissionDecisionReason": "probe says no to c2"}});
    let mut hooked = Run::new(
        script(calls.clone(), None),
        trace(&[ok("c1"), ("c2", true, "Error: probe says no to c2")], &[]),
        vec![body("c2", args(2), 100.0, 110.0, true)],
    );
    hooked
        .hooks
        .push(hook("PreToolUse", "c2", 90.0, deny.clone()));
    assert_eq!(
        hooked.breached(),
        [(InvariantId::DenySkipsBody, "c2".to_owned(), 5)]
    );
    // The same deny, but the result is the body's own: another listener undid it. No breach.
    let mut undone = Run::new(
        script(calls, None),
        trace(&[ok("c1"), ok("c2")], &[]),
        vec![body("c2", args(2), 100.0, 110.0, true)],
    );
    undone.hooks.push(hook("PreToolUse", "c2", 90.0, deny));
    assert_eq!(undone.breached(), []);
}

#[test]
fn a_commit_before_the_body_ended_is_caught_beyond_the_logs_clock_tick() {
    let calls = vec![call("c1", "read", json!({}), false, vec![])];
    let run = |logged: f64| {
        let mut run = Run::new(
            script(calls.clone(), None),
            trace(&[ok("c1")], &[]),
            vec![body("c1", None, 100.0, 200.6, true)],
        );
        run.results_at.insert(CallId::from("c1"), logged);
        run
    };
    // Logged in the millisecond the body ended (`Date.now()` cuts 200.9 to 200): a tie.
    assert_eq!(run(200.0).breached(), []);
    assert_eq!(run(201.0).breached(), []);
    // Logged at 199: in [199, 200), surely before 200.6.
    assert_eq!(
        run(199.0).breached(),
        [(InvariantId::BodySettlesBeforeCommit, "c1".to_owned(), 3)]
    );
    // The post-execute hook ran while the body still ran.
    let mut early_post = run(201.0);
    early_post
        .hooks
        .push(hook("PostToolUse", "c1", 150.0, Value::Null));
    assert_eq!(
        early_post.breached(),
        [(InvariantId::BodySettlesBeforeCommit, "c1".to_owned(), 3)]
    );
}

#[test]
fn a_body_whose_reply_the_harness_did_not_take_has_no_sure_end() {
    // The body throws `boom`; the result is the harness's own timeout: it gave up, its body
    // ended then, and the server's end says nothing about it.
    let calls = vec![call(
        "c1",
        "read",
        json!({}),
        false,
        vec![BodyStep::Sleep(100), BodyStep::Throw("boom".to_owned())],
    )];
    let mut gave_up = Run::new(
        script(calls.clone(), None),
        trace(&[("c1", true, "Error: tool call timed out")], &[]),
        vec![body("c1", None, 100.0, 200.6, true)],
    );
    gave_up.results_at.insert(CallId::from("c1"), 150.0);
    assert_eq!(gave_up.breached(), []);
    // Its own error reached the model: the harness took the reply, so the end is sure.
    let mut took = Run::new(
        script(calls, None),
        trace(&[("c1", true, "Error: boom")], &[]),
        vec![body("c1", None, 100.0, 200.6, true)],
    );
    took.results_at.insert(CallId::from("c1"), 150.0);
    assert_eq!(
        took.breached(),
        [(InvariantId::BodySettlesBeforeCommit, "c1".to_owned(), 3)]
    );
}

#[test]
fn a_body_no_record_names_beyond_doubt_is_not_judged() {
    // Two calls of one tool with equal arguments: the server cannot tell whose body it ran.
    let calls = vec![
        call("c1", "read", json!({}), false, vec![]),
        call("c2", "read", json!({}), false, vec![]),
    ];
    let run = Run::new(
        script(calls.clone(), None),
        trace(&[ok("c1"), ok("c2")], &[]),
        vec![
            body("c1", Some(json!({})), 100.0, 200.0, true),
            body("c2", Some(json!({})), 150.0, 250.0, true),
        ],
    );
    assert_eq!(run.breached(), []);
    // Told apart by their arguments, the same overlap is caught.
    let calls = vec![
        call("c1", "read", json!({"n": 1}), false, vec![]),
        call("c2", "read", json!({"n": 2}), false, vec![]),
    ];
    let run = Run::new(
        script(calls, None),
        trace(&[ok("c1"), ok("c2")], &[]),
        vec![
            body("c1", Some(json!({"n": 1})), 100.0, 200.0, true),
            body("c2", Some(json!({"n": 2})), 150.0, 250.0, true),
        ],
    );
    assert_eq!(
        run.breached(),
        [(InvariantId::OnlySafeBodiesOverlap, "c1".to_owned(), 2)]
    );
}

/// The real run of `denied-call-in-a-parallel-pool` against the source checkout: its records and
/// its trace, with the log's times.
struct RealRun {
    script: RunScript,
    trace: Vec<TraceRecord>,
    results_at: BTreeMap<CallId, f64>,
    log_tick_ms: f64,
    bodies: Vec<BodyRecord>,
    hooks: Vec<HookRecord>,
}

impl RealRun {
    fn load() -> RealRun {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/dsh-src-denied-in-pool");
        let log = std::fs::read(dir.join("session.jsonl")).unwrap();
        let script: RunScript =
            serde_json::from_slice(&std::fs::read(dir.join("script.json")).unwrap()).unwrap();
        let profile = tep_harness::profile::Profile::load("deepseek-harness-source").unwrap();
        let lined = tep_harness::record::lined_trace_of_log(
            &dir.join("session.jsonl"),
            &log,
            &profile.tools,
            &script,
        )
        .unwrap();
        assert_eq!(lined.breaches, [], "the log shows nothing out of place");
        let (results_at, log_tick_ms) = tep_harness::evidence::results_at(&log, &lined.records);
        RealRun {
            script,
            trace: lined.records.into_iter().map(|(_, r)| r).collect(),
            results_at,
            log_tick_ms,
            bodies: tep_harness::mcp::read_lines(&dir.join("bodies.jsonl")),
            hooks: tep_harness::mcp::read_lines(&dir.join("hooks.jsonl")),
        }
    }

    fn judge(&self) -> tep_harness::evidence::Judgement {
        tep_harness::evidence::judge(&RunRecords {
            trace: &self.trace,
            results_at: &self.results_at,
            log_tick_ms: self.log_tick_ms,
            bodies: &self.bodies,
            hooks: &self.hooks,
            script: &self.script,
        })
    }

    fn breached(&self) -> Vec<(InvariantId, String)> {
        self.judge()
            .breaches
            .into_iter()
            .map(|v| {
                (
                    v.invariant,
                    v.call.map(|c| c.as_str().to_owned()).unwrap_or_default(),
                )
            })
            .collect()
    }

    fn body_end(&mut self, call: &str) -> &mut f64 {
        &mut self
            .bodies
            .iter_mut()
            .find(|b| b.event == "end" && b.call.as_deref() == Some(call))
            .unwrap()
            .wall_ms
    }
}

#[test]
fn a_real_run_from_source_holds_and_each_tampered_copy_is_caught() {
    let real = RealRun::load();
    assert_eq!(real.log_tick_ms, 1.0, "the log's times are Date.now()'s");
    let judgement = real.judge();
    assert_eq!(judgement.breaches, []);
    // Something was looked at: c1 and c3's bodies (overlapping, both safe), c2's denial (its
    // hook's reason is in its error result), and both bodies' ends against their commits.
    assert_eq!(
        judgement.judged,
        BTreeMap::from([
            (InvariantId::OnlySafeBodiesOverlap, 2),
            (InvariantId::PoolCap, 0),
            (InvariantId::DenySkipsBody, 1),
            (InvariantId::BodySettlesBeforeCommit, 2),
        ])
    );

    // c2 was denied: a body for it is a breach.
    let mut denied_ran = RealRun::load();
    let c1 = denied_ran.bodies[..2].to_vec();
    denied_ran.bodies.extend(c1.into_iter().map(|mut b| {
        b.call = Some("c2".to_owned());
        b
    }));
    assert!(
        denied_ran
            .breached()
            .contains(&(InvariantId::DenySkipsBody, "c2".to_owned())),
        "{:?}",
        denied_ran.breached()
    );

    // c1's body ends 5 ms after its `tool/result` was logged.
    let mut late = RealRun::load();
    let logged = late.results_at[&CallId::from("c1")];
    *late.body_end("c1") = logged + 5.0;
    assert_eq!(
        late.breached(),
        [(InvariantId::BodySettlesBeforeCommit, "c1".to_owned())]
    );
    // Within the log's millisecond it is a tie, once the post-execute hook (invoked before
    // the log's line) is out of the way: that one alone is caught.
    *late.body_end("c1") = logged + 0.9;
    assert_eq!(
        late.breached(),
        [(InvariantId::BodySettlesBeforeCommit, "c1".to_owned())]
    );
    late.hooks
        .retain(|h| !(h.event == "PostToolUse" && h.call.as_deref() == Some("c1")));
    assert_eq!(late.breached(), []);

    // The same run under a pool cap of 1: c1 and c3 ran at once.
    let mut capped = RealRun::load();
    capped.script.max_parallel = Some(1);
    assert_eq!(capped.breached(), [(InvariantId::PoolCap, "c3".to_owned())]);

    // c3 as an exclusive call: its body overlapped c1's.
    let mut exclusive = RealRun::load();
    let c3 = exclusive
        .script
        .calls
        .iter_mut()
        .find(|c| c.call_id == "c3")
        .unwrap();
    c3.query = None;
    assert_eq!(
        exclusive.breached(),
        [(InvariantId::OnlySafeBodiesOverlap, "c3".to_owned())]
    );
}
