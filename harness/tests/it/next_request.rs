//! Level `boundary` on a real run: the session log of the study's run s2 of deepseek-harness
//! 0.1.0-rc.8 and the requests its mock model received, merged as the driver merges them, and
//! checked. What this shows of the harness is in `docs/harness-profiles.md`.

use std::path::Path;

use serde_json::Value;
use tep_check::{CheckOptions, InvariantId, InvariantStatus, check_records};
use tep_harness::model_server::{ModelRequest, RequestKind};
use tep_harness::profile::Profile;
use tep_harness::record::{next_request, trace_of_log, with_next_requests};
use tep_harness::script::{FINAL_TEXT, RunScript};
use tep_model::graph::{NodeId, Revision};
use tep_model::identity::CallId;
use tep_model::trace::{ObservationLevel, RequestMessage, RequestRole, TraceRecord};

const LOG: &str = include_str!("../fixtures/dsh-cli-s2.session.jsonl");
const REQUESTS: &str = include_str!("../fixtures/dsh-cli-s2-model-requests.jsonl");

/// The mock's records as the model server records them (`wall` in seconds there).
fn requests() -> Vec<ModelRequest> {
    REQUESTS
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            ModelRequest {
                wall_ms: v["wall"].as_f64().unwrap() * 1000.0,
                path: v["path"].as_str().unwrap().to_owned(),
                kind: if v["kind"] == "step" {
                    RequestKind::Step
                } else {
                    RequestKind::Aux
                },
                step: v["step"].as_u64().map(|s| s as usize),
                user_agent: None,
                body: v["body"].clone(),
            }
        })
        .collect()
}

/// The run's trace at level `boundary`, as the driver makes it (the MCP tool's name is the
/// harness's own here: the study's server was not tep's).
fn merged() -> Vec<TraceRecord> {
    let mut tools = Profile::load("deepseek-harness").unwrap().tools;
    tools.prefix = "mcp__probe__".to_owned();
    // No scenario: the study's calls keep their own names (`web_search` among them).
    let script = RunScript {
        scenario: "s2".to_owned(),
        tools: vec![],
        calls: vec![],
        pre: vec![],
        post: vec![],
        final_text: FINAL_TEXT.to_owned(),
        max_parallel: None,
        safe_timeout_ms: None,
    };
    let records = trace_of_log(Path::new("s2.jsonl"), LOG.as_bytes(), &tools, &script).unwrap();
    with_next_requests(records, &requests())
}

fn options() -> CheckOptions {
    CheckOptions::new(Revision::Rev2).observed(ObservationLevel::Boundary)
}

#[test]
fn the_request_after_the_batch_is_read_from_the_model_servers_records() {
    let records = merged();
    let requests: Vec<_> = records
        .iter()
        .enumerate()
        .filter_map(|(i, r)| match r {
            TraceRecord::Request(q) => Some((i, q)),
            _ => None,
        })
        .collect();
    assert_eq!(requests.len(), 1, "one batch, one next request");
    let (at, request) = &requests[0];
    assert_eq!(*at, records.len() - 1, "after every record of its batch");
    let TraceRecord::Header(header) = &records[0] else {
        panic!("the log's header first");
    };
    assert_eq!(header.observation, Some(ObservationLevel::Boundary));
    let tools: Vec<&str> = request
        .messages
        .iter()
        .filter(|m| m.role == RequestRole::Tool)
        .map(|m| m.call_id.as_ref().unwrap().as_str())
        .collect();
    assert_eq!(
        tools,
        ["c1", "c2", "c3", "c4", "c5", "s1", "s2", "s3", "s4", "c6"]
    );
    let c3 = &request.messages[2];
    assert_eq!(c3.content, "Error: probe hook exit2 for c3");
    let users: Vec<&str> = request
        .messages
        .iter()
        .filter(|m| m.role == RequestRole::User)
        .map(|m| m.content.as_str())
        .collect();
    assert_eq!(users, ["ctx_from_c5", "ctx_from_s1", "ctx_from_c6"]);
}

#[test]
fn a_request_for_other_calls_is_no_evidence_about_this_batch() {
    let requests = requests();
    let calls: Vec<CallId> = ["c1", "c2"]
        .iter()
        .map(|c| CallId::new((*c).to_owned()))
        .collect();
    assert_eq!(next_request(&requests, 0, &calls), None);
    // The title request offers no tools and holds no batch: never taken for the next step.
    assert_eq!(next_request(&requests[1..2], 0, &calls), None);
}

#[test]
fn the_real_run_passes_the_next_request_invariants() {
    let records = merged();
    let report = check_records(&options(), &records).unwrap();
    let ours = [
        InvariantId::RequestOneResultPerCall,
        InvariantId::RequestModelOrder,
        InvariantId::RequestErrorsAsErrors,
        InvariantId::RequestContextsAfterResults,
    ];
    for id in ours {
        assert_eq!(options().status(id), InvariantStatus::Checked, "{id}");
    }
    assert_eq!(report.batches, 1);
    assert_eq!(
        report.violations,
        [],
        "deepseek-harness 0.1.0-rc.8, run s2, at level boundary"
    );
    assert!(records.iter().any(|r| r.node() == Some(NodeId::Model)));
}

/// A change to the request's messages.
type Edit = fn(&mut Vec<RequestMessage>);

#[test]
fn the_same_run_with_its_request_tampered_with_is_caught() {
    // The merge's teeth on real data: the request the harness sent, changed as a faulty
    // harness would send it.
    let cases: [(&str, Edit, InvariantId); 4] = [
        (
            "a result lost",
            |m| {
                m.remove(4);
            },
            InvariantId::RequestOneResultPerCall,
        ),
        (
            "two results swapped",
            |m| m.swap(5, 6),
            InvariantId::RequestModelOrder,
        ),
        (
            "an error told as a success",
            |m| {
                m[4].content = "body c5 failed".to_owned();
            },
            InvariantId::RequestErrorsAsErrors,
        ),
        (
            "a context before the results",
            |m| {
                let c = m.remove(10);
                m.insert(0, c);
            },
            InvariantId::RequestContextsAfterResults,
        ),
    ];
    for (what, edit, id) in cases {
        let mut records = merged();
        let Some(TraceRecord::Request(request)) = records.last_mut() else {
            panic!("no request");
        };
        edit(&mut request.messages);
        let report = check_records(&options(), &records).unwrap();
        let found: Vec<InvariantId> = report.violations.iter().map(|v| v.invariant).collect();
        assert_eq!(found, [id], "{what}: {:?}", report.violations);
    }
}
