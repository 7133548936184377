//! The scenario limits and the answer limit agree: the largest scenarios we can build inside
//! every scenario limit (`conformance/src/scenario/limits.rs`) have traces that fit in one
//! answer (`adapter::MAX_ANSWER_BYTES`). Before the limits were lowered, a legal scenario's
//! answer was 86.6 MB and `tep reference-adapter` could not send it (attack run, N9).

use serde_json::{Value, json};
use tep_conformance::adapter::MAX_ANSWER_BYTES;
use tep_conformance::protocol::{RunAnswer, RunOutcome};
use tep_conformance::scenario::Scenario;
use tep_conformance::scenario::limits::{
    MAX_BODY_STEPS, MAX_CALLS, MAX_DISPATCHES_PER_CALL, MAX_EXTENSIONS, MAX_PROGRAM_STEPS,
    MAX_TEXT_BYTES,
};
use tep_conformance::scripted::{ReferenceRun, run_reference_to_the_end};
use tep_model::graph::Revision;

/// A text at the limit, different for each `tag` (a trace cannot share it).
fn text(tag: &str) -> String {
    format!("{tag}{}", "x".repeat(MAX_TEXT_BYTES - tag.len()))
}

/// Every extension point full, each quoting a text at the limit, and a retry that dispatches
/// as often as allowed: what amplifies each call's records the most.
fn extensions() -> Value {
    let n = MAX_EXTENSIONS;
    let mut wrappers = vec![json!({"kind": "retry", "attempts": MAX_DISPATCHES_PER_CALL})];
    wrappers.extend((1..n).map(|k| json!({"kind": "context", "text": text(&format!("w{k}"))})));
    json!({
        "pre": (0..n).map(|k| json!({"id": format!("p{k}"), "decide": {"*": "pass"}})).collect::<Vec<_>>(),
        "guards": (0..n).map(|k| json!({"id": format!("g{k}"), "decide": {"*": "abstain"}})).collect::<Vec<_>>(),
        "wrappers": wrappers,
        "post": (0..n).map(|k| json!({"id": format!("q{k}"), "decide": {"*": {"addContext": text(&format!("q{k}"))}}})).collect::<Vec<_>>(),
        "observers": (0..n).map(|k| json!({"id": format!("o{k}"), "asyncMs": 1})).collect::<Vec<_>>(),
    })
}

fn scenario(id: &str, calls: Vec<Value>, tools: Value, extensions: &Value) -> Value {
    // What the reference makes of them does not matter here, only how much it writes.
    let expect: serde_json::Map<String, Value> = calls
        .iter()
        .map(|c| {
            (
                c["callId"].as_str().unwrap().to_owned(),
                json!({"isError": true, "bodyRuns": 1, "postRuns": false}),
            )
        })
        .collect();
    let mut s = json!({
        "id": id,
        "description": "the largest scenario of its shape inside the limits",
        "spec": "docs/limits.md",
        "revisions": ["rev2"],
        "exercises": ["stage-graph-walk"],
        "tools": tools,
        "calls": calls,
        "expect": {"calls": expect, "contexts": []},
    });
    let mut requires = Vec::new();
    if calls_run_code(&s) {
        requires.push("code-mode");
    }
    if s["tools"]
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t["concurrencySafe"] == true)
    {
        requires.push("parallel");
    }
    s["requires"] = json!(requires);
    for (k, v) in extensions.as_object().unwrap() {
        s[k] = v.clone();
    }
    s
}

fn calls_run_code(s: &Value) -> bool {
    s["calls"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c.get("program").is_some())
}

/// The largest `calls(n)` that the limits accept (they bind on calls, steps or bytes).
fn largest(
    id: &str,
    tools: Value,
    extensions: &Value,
    calls: impl Fn(usize) -> Vec<Value>,
) -> Scenario {
    let mut best = None;
    let mut refusal = String::new();
    for n in 1..=MAX_CALLS.max(MAX_PROGRAM_STEPS) {
        let calls = calls(n);
        match Scenario::from_json(&scenario(id, calls, tools.clone(), extensions).to_string()) {
            Ok(s) => best = Some(s),
            Err(e) => {
                refusal = e.to_string();
                break;
            }
        }
    }
    eprintln!("{id}: the next one is refused: {refusal}");
    best.unwrap_or_else(|| panic!("{id}: not even one call fits: {refusal}"))
}

/// The answer `tep reference-adapter` sends for `scenario`, in bytes.
fn answer_bytes(scenario: &Scenario) -> usize {
    let trace = match run_reference_to_the_end(scenario, Revision::Rev2, &[]).unwrap() {
        ReferenceRun::Trace(records) => records,
        ReferenceRun::Escaped { records, .. } => records,
    };
    let answer = RunAnswer {
        seq: u64::MAX,
        outcome: RunOutcome::Trace(trace),
    };
    serde_json::to_string(&answer).unwrap().len() + 1
}

#[test]
fn the_largest_scenarios_answer_within_the_answer_limit() {
    let sequential = json!([{"name": "t", "concurrencySafe": false}]);
    let parallel = json!([{"name": "t", "concurrencySafe": true}]);
    let full = extensions();
    let none = json!({});
    // Each body defers as many contexts as it may, then throws: every dispatch runs it whole.
    fn deferring(i: usize) -> Value {
        let mut body: Vec<Value> = (1..MAX_BODY_STEPS)
            .map(|k| json!({"deferContext": format!("{i}.{k}")}))
            .collect();
        body.push(json!({"throw": "b"}));
        json!({"callId": format!("c{i}"), "tool": "t", "arguments": {}, "body": body})
    }
    fn long_arguments(i: usize) -> Value {
        json!({"callId": format!("c{i}"), "tool": "t", "arguments": {"a": text(&i.to_string())}, "body": [{"throw": "b"}]})
    }
    // One program of `n` sub-calls, each deferring a context and returning.
    let program = |n: usize| {
        let steps: Vec<Value> = (0..n)
            .map(|k| json!({"call": {"tool": "t", "arguments": {}, "body": [{"deferContext": k.to_string()}, {"return": k}]}}))
            .collect();
        vec![
            json!({"callId": "c0", "tool": "run_code", "arguments": {"code": "x"}, "program": steps}),
        ]
    };
    let each = |call: fn(usize) -> Value| move |n: usize| (0..n).map(call).collect::<Vec<_>>();
    // Shorter bodies, more calls: the trade the runnable-bytes limit allows (the third attack
    // run's `gen-max4.py` answered 1.46 MB with 64 calls of short bodies, past the 0.9 MB the
    // full bodies reach). Every body length, each with as many calls as fit.
    let short_bodies = (1..=MAX_BODY_STEPS).map(|steps| {
        let call = move |i: usize| {
            let mut body: Vec<Value> = (1..steps)
                .map(|k| json!({"deferContext": format!("{i}.{k}")}))
                .collect();
            body.push(json!({"throw": "b"}));
            json!({"callId": format!("c{i}"), "tool": "t", "arguments": {}, "body": body})
        };
        largest(
            &format!("deferring-{steps}-steps"),
            sequential.clone(),
            &full,
            move |n| (0..n).map(call).collect(),
        )
    });
    let mut shapes: Vec<Scenario> = short_bodies.collect();
    shapes.extend([
        // (`deferring-16-steps` above is the full-body shape.)
        largest("deferring-bare", sequential.clone(), &none, each(deferring)),
        largest("deferring-parallel", parallel, &full, each(deferring)),
        largest(
            "long-arguments",
            sequential.clone(),
            &full,
            each(long_arguments),
        ),
        largest("program", sequential, &full, program),
    ]);
    let mut sizes = Vec::new();
    for s in &shapes {
        let bytes = answer_bytes(s);
        sizes.push(format!("{}: {} calls, {bytes} bytes", s.id, s.calls.len()));
        assert!(
            bytes < MAX_ANSWER_BYTES / 2,
            "{}: an answer of {bytes} bytes leaves less than half of the {MAX_ANSWER_BYTES}-byte limit",
            s.id
        );
    }
    // The shapes are at the limits, not trivially small.
    assert!(shapes.iter().any(|s| s.calls.len() > 8), "{sizes:?}");
    // docs/limits.md states the largest (1.5 MB); the sweep must reach past what it replaced.
    let most = shapes.iter().map(answer_bytes).max().unwrap_or(0);
    assert!(
        (1_000_000..1_500_000).contains(&most),
        "the largest answer is {most} bytes: update docs/limits.md"
    );
    eprintln!("{}", sizes.join("\n"));
}
