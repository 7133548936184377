//! Code Mode: `run_code` and the sub-calls of its program, through the same pipeline.

use std::sync::{Arc, Mutex};

use crate::support::*;
use serde_json::{Value, json};
use tep_model::graph::{NodeId, Outcome, StageGraph};
use tep_model::identity::CallId;
use tep_model::result::Failure;
use tep_model::session::EventBody;
use tep_model::trace::TraceRecord;
use tep_reference::execution::Execution;
use tep_reference::pipeline::code_mode::{Bindings, Program, ProgramLoader, ProgramOutput};
use tep_reference::pipeline::{
    BoxFuture, GuardVerdict, ModelCall, PostDecision, PreDecision, ToolRegistry, simple,
};

/// What a scripted program step does.
#[derive(Clone)]
enum Step {
    Call(&'static str),
    All(Vec<&'static str>),
    CallRunCode,
    /// Logs the tools the bindings offer.
    ListTools,
}

/// A program that calls tools in order and logs what each binding did.
struct Script {
    steps: Vec<Step>,
    seen: Arc<Mutex<Vec<String>>>,
}

impl Program for Script {
    fn run<'a>(
        &'a self,
        bindings: &'a Bindings<'a>,
    ) -> BoxFuture<'a, Result<ProgramOutput, Failure>> {
        Box::pin(async move {
            let mut logs = Vec::new();
            let mut note =
                |tool: &str, r: Result<Value, tep_reference::pipeline::code_mode::ToolCallError>| {
                    let line = match r {
                        Ok(v) => format!("{tool} -> {}", v.as_str().unwrap_or("?")),
                        Err(e) => format!("{tool} rejected: {}: {}", e.tool_name, e.message),
                    };
                    self.seen.lock().unwrap().push(line.clone());
                    logs.push(line);
                };
            for step in &self.steps {
                match step {
                    Step::Call(tool) => {
                        note(tool, bindings.call(tool, json!({"from": "program"})).await)
                    }
                    Step::All(tools) => {
                        let calls = tools.iter().map(|t| (t.to_string(), json!({}))).collect();
                        for (tool, r) in tools.iter().zip(bindings.call_all(calls).await) {
                            note(tool, r);
                        }
                    }
                    Step::CallRunCode => {
                        note("run_code", bindings.call("run_code", json!({})).await)
                    }
                    Step::ListTools => note("tools", Ok(json!(bindings.tools().join(", ")))),
                }
            }
            Ok(ProgramOutput { logs, value: None })
        })
    }
}

struct Loader(Vec<Step>, Arc<Mutex<Vec<String>>>);

impl ProgramLoader for Loader {
    fn load(&self, _exec: &Execution) -> Result<Arc<dyn Program>, Failure> {
        Ok(Arc::new(Script {
            steps: self.0.clone(),
            seen: self.1.clone(),
        }))
    }
}

fn registry(steps: Vec<Step>, seen: Arc<Mutex<Vec<String>>>) -> ToolRegistry {
    // Definitions with a (content-keeping) finalizeContent, so every sub-call visits every
    // stage of the Code Mode graph.
    let keep = |_: &tep_model::result::ToolResult| Ok(None);
    ToolRegistry::builder()
        .tool(
            TestTool::slow("read", json!("contents"), 10)
                .safe()
                .finalize(keep),
        )
        .tool(TestTool::new("note", Body::DeferThenOk("from a sub-call".into())).finalize(keep))
        .tool(TestTool::returning("rm", json!("gone")).finalize(keep))
        .pre_execute(simple::pre("policy", |e| {
            Ok((e.name() == "rm").then(|| PreDecision::Deny {
                reason: "rm is not allowed".into(),
            }))
        }))
        .guard(simple::guard("g", |_| Ok(GuardVerdict::Abstain)))
        .post_execute(simple::post("q", |_, _| Ok(None::<PostDecision>)))
        .code_mode(Arc::new(Loader(steps, seen)))
        .build()
        .unwrap()
}

fn sub_walk(records: &[TraceRecord], call: &str) -> Vec<(NodeId, Option<Outcome>)> {
    records
        .iter()
        .filter(|r| r.call().map(CallId::as_str) == Some(call))
        .filter_map(|r| match r {
            TraceRecord::Stage(o) => Some((o.node, o.outcome)),
            TraceRecord::Event(e) => {
                EventBody::code_mode_node_of(e.event.body.type_name()).map(|n| (n, None))
            }
            _ => None,
        })
        .fold(Vec::new(), crate::support::collapse_around)
}

#[tokio::test(start_paused = true)]
async fn sub_calls_re_enter_the_pipeline_one_at_a_time_with_the_parent_token() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let reg = registry(
        vec![
            Step::Call("read"),
            Step::All(vec!["read", "note"]),
            Step::Call("rm"),
        ],
        seen.clone(),
    );
    let report = reg
        .run_batch(vec![ModelCall::new("c1", "run_code", "{}")])
        .await;
    let records = reg.recorder().records();

    // Every sub-call walks the Code Mode graph, through every stage of the pipeline.
    let graph = StageGraph::code_mode(reg.revision());
    for n in 1..=4 {
        let id = format!("c1:code:{n}");
        let walk = sub_walk(&records, &id);
        graph
            .check_walk(NodeId::RunCode, &walk)
            .unwrap_or_else(|(i, e)| panic!("{id} visit {i}: {e} in {walk:?}"));
        assert_eq!(walk.first().map(|w| w.0), Some(NodeId::DispatchStart));
        assert_eq!(walk.last().map(|w| w.0), Some(NodeId::Dispatched));
        assert!(
            walk.iter().any(|w| w.0 == NodeId::Pre) && walk.iter().any(|w| w.0 == NodeId::Final)
        );
    }
    // One at a time, in submission order: each starts after the previous one is committed.
    let pos = |ty: &str, id: &str| {
        records
            .iter()
            .position(|r| matches!(r, TraceRecord::Event(e) if e.event.body.type_name() == ty && e.call.as_ref().map(CallId::as_str) == Some(id)))
            .unwrap()
    };
    for n in 1..4 {
        assert!(
            pos("tool/code-dispatch", &format!("c1:code:{n}"))
                < pos("tool/code-dispatch-start", &format!("c1:code:{}", n + 1))
        );
    }
    // The parent's token is carried; each sub-call has its own.
    let parent_token = records
        .iter()
        .find_map(|r| match r {
            TraceRecord::Stage(o)
                if o.node == NodeId::Pre && o.call.as_ref().map(CallId::as_str) == Some("c1") =>
            {
                o.identity.clone()
            }
            _ => None,
        })
        .unwrap()
        .token
        .clone();
    for r in &records {
        if let TraceRecord::Stage(o) = r
            && o.call
                .as_ref()
                .is_some_and(|c| c.as_str().starts_with("c1:code:"))
        {
            assert_eq!(o.parent.as_ref().map(CallId::as_str), Some("c1"));
            if let Some(identity) = &o.identity {
                assert_eq!(
                    identity.parent_token.as_deref(),
                    Some(parent_token.as_str())
                );
                assert_ne!(identity.token, parent_token);
            }
        }
    }
    // A denied sub-call reaches the program as a rejection with the tool name and message only.
    let seen = seen.lock().unwrap().clone();
    assert_eq!(
        seen,
        vec![
            "read -> contents",
            "read -> contents",
            "note -> ok",
            "rm rejected: rm: rm is not allowed"
        ]
    );
    // The outer call is an ordinary call of its batch: its result is the program's output.
    assert_eq!(report.outcomes[0].result.text(), seen.join("\n"));
    // Sub-call contexts are omitted: nothing is injected.
    assert!(injected(&reg.recorder().session_log()).is_empty());
    // Dispatch events never become model messages.
    for e in reg.recorder().session_log() {
        if e.body.type_name().starts_with("tool/code-dispatch") {
            assert!(e.surface_op.is_none());
        }
    }
}

#[tokio::test(start_paused = true)]
async fn programs_cannot_call_run_code() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let reg = registry(vec![Step::CallRunCode, Step::Call("read")], seen.clone());
    reg.run_batch(vec![ModelCall::new("c1", "run_code", "{}")])
        .await;
    assert_eq!(
        seen.lock().unwrap()[0],
        "run_code rejected: run_code: run_code is not available to programs"
    );
    let records = reg.recorder().records();
    // Nothing was dispatched for it: the first real call is sub-call 1.
    assert!(
        records
            .iter()
            .all(|r| r.call().map(CallId::as_str) != Some("c1:code:2"))
    );
    assert!(!sub_walk(&records, "c1:code:1").is_empty());
}

#[tokio::test(start_paused = true)]
async fn programs_are_offered_every_registered_tool_but_run_code() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let reg = registry(vec![Step::ListTools], seen.clone());
    reg.run_batch(vec![ModelCall::new("c1", "run_code", "{}")])
        .await;
    assert_eq!(*seen.lock().unwrap(), ["tools -> note, read, rm"]);
}

#[tokio::test(start_paused = true)]
async fn without_code_mode_run_code_is_an_unknown_tool() {
    let reg = ToolRegistry::builder().build().unwrap();
    let report = reg
        .run_batch(vec![ModelCall::new("c1", "run_code", "{}")])
        .await;
    assert_eq!(report.outcomes[0].result.error_code(), Some("UNKNOWN_TOOL"));
}
