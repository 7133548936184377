//! The doubles tep plays, without the harness: the MCP server over a byte stream, the hook
//! command on the payloads the real bridge sent, the session log the real harness wrote.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tep_conformance::scenario::{BlockSpec, BodyStep, Listener, PostAction, PreAction};
use tep_harness::hook::{HOOKS_FILE, HookRecord, answer, invoke};
use tep_harness::mcp::{BODIES_FILE, BodyRecord, SCRIPT_FILE, read_lines, serve};
use tep_harness::profile::{Compression, Profile};
use tep_harness::record::{read_log, trace_of_log};
use tep_harness::script::{RunScript, ScriptedCall};
use tep_model::graph::NodeId;

fn call(id: &str, tool: &str, arguments: Value, body: Vec<BodyStep>) -> ScriptedCall {
    ScriptedCall {
        call_id: id.to_owned(),
        tool: tool.to_owned(),
        model_name: format!("mcp__tep__{tool}"),
        arguments,
        body,
        query: None,
    }
}

fn listener<A>(id: &str, decide: Vec<(&str, A)>) -> Listener<A> {
    Listener {
        id: id.to_owned(),
        decide: decide
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect::<BTreeMap<_, _>>(),
    }
}

fn script(calls: Vec<ScriptedCall>) -> RunScript {
    crate::script(calls, None)
}

#[derive(Clone, Default)]
struct Shared(Arc<Mutex<Vec<u8>>>);
impl Write for Shared {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn write_script(dir: &Path, s: &RunScript) {
    std::fs::write(dir.join(SCRIPT_FILE), serde_json::to_vec(s).unwrap()).unwrap();
}

#[test]
fn mcp_serves_the_tools_and_runs_each_calls_body_in_model_order() {
    let dir = tempfile::tempdir().unwrap();
    let same = json!({"path": "a"});
    write_script(
        dir.path(),
        &script(vec![
            call(
                "c1",
                "rm",
                same.clone(),
                vec![BodyStep::Throw("boom".into())],
            ),
            call(
                "c2",
                "rm",
                same.clone(),
                vec![BodyStep::Sleep(5), BodyStep::Return(json!({"n": 1}))],
            ),
            call("c3", "read", json!({"path": "b"}), vec![]),
        ]),
    );
    let requests = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18"}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "rm", "arguments": same}}),
        json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "read", "arguments": {"path": "b"}}}),
        json!({"jsonrpc": "2.0", "id": 5, "method": "nope"}),
    ];
    let input: String = requests.iter().map(|r| format!("{r}\n")).collect();
    let out = Shared::default();
    serve(dir.path(), input.as_bytes(), out.clone()).unwrap();
    let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
    let answers: BTreeMap<i64, Value> = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .map(|v| (v["id"].as_i64().unwrap(), v))
        .collect();
    assert_eq!(answers.len(), 5, "a notification gets no answer: {text}");
    assert_eq!(answers[&1]["result"]["protocolVersion"], "2025-06-18");
    let names: Vec<&str> = answers[&2]["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["read", "rm"]);
    assert_eq!(
        answers[&3]["result"],
        json!({"content": [{"type": "text", "text": "boom"}], "isError": true}),
        "the first rm call is c1's body, which throws"
    );
    assert_eq!(
        answers[&4]["result"]["content"][0]["text"], "ok",
        "a body with no return"
    );
    assert_eq!(answers[&5]["error"]["code"], -32601);
    let bodies: Vec<BodyRecord> = read_lines(&dir.path().join(BODIES_FILE));
    let mut seen: Vec<(String, Option<String>)> = bodies
        .iter()
        .map(|b| (b.event.clone(), b.call.clone()))
        .collect();
    // The two bodies ran on threads of their own: their records may interleave.
    seen.sort();
    assert_eq!(
        seen,
        [
            ("end".into(), Some("c1".into())),
            ("end".into(), Some("c3".into())),
            ("start".into(), Some("c1".into())),
            ("start".into(), Some("c3".into())),
        ]
    );
}

#[test]
fn equal_calls_get_their_own_bodies_in_arrival_order() {
    let dir = tempfile::tempdir().unwrap();
    let same = json!({"path": "a"});
    write_script(
        dir.path(),
        &script(vec![
            call(
                "c1",
                "rm",
                same.clone(),
                vec![BodyStep::Return(json!("first"))],
            ),
            call(
                "c2",
                "rm",
                same.clone(),
                vec![BodyStep::Return(json!("second"))],
            ),
        ]),
    );
    let input: String = (1..=2)
        .map(|id| format!("{}\n", json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "rm", "arguments": same}})))
        .collect();
    let out = Shared::default();
    serve(dir.path(), input.as_bytes(), out.clone()).unwrap();
    let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
    let answers: BTreeMap<i64, String> = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .map(|v| {
            (
                v["id"].as_i64().unwrap(),
                v["result"]["content"][0]["text"]
                    .as_str()
                    .unwrap()
                    .to_owned(),
            )
        })
        .collect();
    assert_eq!(
        answers,
        BTreeMap::from([(1, "first".to_owned()), (2, "second".to_owned())])
    );
}

/// The recorded invocations of the study's run s2, and the answers the real bridge honoured.
fn recorded() -> Vec<Value> {
    include_str!("../fixtures/dsh-cli-s2-hooks-c1.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn the_hook_answers_the_real_bridges_payloads_as_the_bridge_expects() {
    let mut s = script(vec![]);
    s.pre = vec![
        listener(
            "first",
            vec![("c9", PreAction::Deny("not this one".into()))],
        ),
        listener(
            "second",
            vec![("c1", PreAction::Deny("probe hook says deny for c1".into()))],
        ),
        listener(
            "third",
            vec![("*", PreAction::Deny("never reached".into()))],
        ),
    ];
    s.post = vec![
        listener(
            "outer",
            vec![(
                "c4",
                PostAction::Block(BlockSpec {
                    feedback: "probe hook blocked c4".into(),
                    context: None,
                }),
            )],
        ),
        listener(
            "inner",
            vec![("c5", PostAction::AddContext("ctx_from_c5".into()))],
        ),
    ];
    for r in recorded() {
        let got = answer(&s, &r["payload"]);
        let want = if r["answer"].is_null() {
            String::new()
        } else {
            r["answer"].to_string()
        };
        let got_value: Value = serde_json::from_str(&got.stdout).unwrap_or(Value::Null);
        assert_eq!(
            got_value, r["answer"],
            "{} {}: {got:?} vs {want}",
            r["event"], r["payload"]["tool_use_id"]
        );
        assert_eq!(got.exit, 0);
    }
}

#[test]
fn an_ask_and_a_pass_and_every_invocation_is_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = script(vec![]);
    s.pre = vec![listener(
        "p",
        vec![("c1", PreAction::Ask(None)), ("c2", PreAction::Pass)],
    )];
    let payload = |id: &str| {
        json!({"hook_event_name": "PreToolUse", "tool_name": "mcp__tep__rm", "tool_input": {}, "tool_use_id": id}).to_string()
    };
    let asked = invoke(dir.path(), &s, &payload("c1"));
    let v: Value = serde_json::from_str(&asked.stdout).unwrap();
    assert_eq!(
        v,
        json!({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "ask"}})
    );
    let passed = invoke(dir.path(), &s, &payload("c2"));
    assert_eq!(passed.stdout, "");
    let records: Vec<HookRecord> = read_lines(&dir.path().join(HOOKS_FILE));
    let calls: Vec<Option<String>> = records.iter().map(|r| r.call.clone()).collect();
    assert_eq!(calls, [Some("c1".to_owned()), Some("c2".to_owned())]);
}

#[test]
fn the_real_harnesss_log_decodes_every_frame_and_reads_as_a_trace_with_the_scenarios_names() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/dsh-0.1.0-rc.8-unknown-tool.session.jsonl.zstd");
    let log = read_log(&path, Compression::Zstd).unwrap();
    let lines = log.split(|&b| b == b'\n').filter(|l| !l.is_empty()).count();
    assert_eq!(lines, 33, "all the frames the harness appended");
    let profile = Profile::load("deepseek-harness").unwrap();
    let mut script = script(vec![]);
    script.tools = vec!["read".to_owned()];
    let records = trace_of_log(&path, &log, &profile.tools, &script).unwrap();
    let batches = records
        .iter()
        .filter(|r| r.node() == Some(NodeId::Model))
        .count();
    assert_eq!(batches, 1);
    let text: String = records
        .iter()
        .map(|r| serde_json::to_string(r).unwrap())
        .collect();
    assert!(text.contains("\"nope\""), "the unknown tool's call");
    assert!(text.contains("UNKNOWN_TOOL"), "{text}");
}

/// A run of `parallel-results-commit-in-model-order` on the published harness: two `fetch` calls
/// played by the shipped `web_search`.
#[test]
fn calls_played_by_the_shipped_safe_tool_get_the_scenarios_tool_back_and_stay_safe() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/dsh-0.1.0-rc.8-web-search.session.jsonl.zstd");
    let log = read_log(&path, Compression::Zstd).unwrap();
    let profile = Profile::load("deepseek-harness").unwrap();
    let corpus = tep_conformance::scenario::corpus().unwrap();
    let scenario = corpus
        .iter()
        .find(|s| s.id == "parallel-results-commit-in-model-order")
        .unwrap();
    let script = RunScript::of(scenario, &profile).unwrap();
    let records = trace_of_log(&path, &log, &profile.tools, &script).unwrap();
    let model = records
        .iter()
        .find(|r| r.node() == Some(NodeId::Model))
        .map(|r| serde_json::to_value(r).unwrap())
        .unwrap();
    assert_eq!(
        model["calls"],
        json!([{"callId": "c1", "name": "fetch", "concurrencySafe": true},
               {"callId": "c2", "name": "fetch", "concurrencySafe": true}]),
        "{model}"
    );
    let text: String = records
        .iter()
        .map(|r| serde_json::to_string(r).unwrap())
        .collect();
    assert!(!text.contains("\"web_search\""), "{text}");
}
