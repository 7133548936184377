//! Helpers shared by the reference's integration tests.
#![allow(dead_code)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tep_model::graph::{NodeId, Outcome, StageGraph};
use tep_model::identity::CallId;
use tep_model::result::{ContentBlock, Failure, ToolResult};
use tep_model::session::{EventBody, SessionEvent};
use tep_model::trace::{Observation, TraceRecord};
use tep_reference::pipeline::{BoxFuture, ModelCall, Tool, ToolContext, ToolRegistry};

type FinalizeFn = dyn Fn(&ToolResult) -> Result<Option<Vec<ContentBlock>>, Failure> + Send + Sync;

/// What a test tool's body does.
#[derive(Clone)]
pub enum Body {
    /// Sleeps (cancellably), then returns the value.
    Return { value: Value, delay_ms: u64 },
    /// Fails with the message.
    Fail(String),
    /// Panics with the message.
    Panic(String),
    /// Waits until cancelled, then fails as cancelled.
    Hang,
    /// Fails on the first `n` dispatches, then returns "ok".
    FlakyThenOk(u32),
    /// Defers a context, then returns "ok".
    DeferThenOk(String),
    /// Defers a context, then fails.
    DeferThenFail(String),
}

pub struct TestTool {
    pub name: String,
    pub safe: bool,
    pub timeout: Option<Duration>,
    pub body: Body,
    pub dispatches: Arc<Mutex<u32>>,
    pub finalize: Option<Finalizer>,
}

impl TestTool {
    pub fn new(name: &str, body: Body) -> Self {
        TestTool {
            name: name.to_owned(),
            safe: false,
            timeout: None,
            body,
            dispatches: Arc::new(Mutex::new(0)),
            finalize: None,
        }
    }

    pub fn safe(mut self) -> Self {
        self.safe = true;
        self
    }

    pub fn timeout_ms(mut self, ms: u64) -> Self {
        self.timeout = Some(Duration::from_millis(ms));
        self
    }

    pub fn finalize(
        mut self,
        f: impl Fn(&ToolResult) -> Result<Option<Vec<ContentBlock>>, Failure> + Send + Sync + 'static,
    ) -> Self {
        self.finalize = Some(Finalizer(Arc::new(f)));
        self
    }

    pub fn returning(name: &str, value: Value) -> Self {
        Self::new(name, Body::Return { value, delay_ms: 0 })
    }

    pub fn slow(name: &str, value: Value, delay_ms: u64) -> Self {
        Self::new(name, Body::Return { value, delay_ms })
    }
}

impl Tool for TestTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn is_concurrency_safe(&self, _args: &Value) -> bool {
        self.safe
    }

    fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    fn execute<'a>(&'a self, ctx: ToolContext<'a>) -> BoxFuture<'a, Result<Value, Failure>> {
        Box::pin(async move {
            let n = {
                let mut d = self.dispatches.lock().unwrap_or_else(|e| e.into_inner());
                *d += 1;
                *d
            };
            match &self.body {
                Body::Return { value, delay_ms } => {
                    tokio::select! {
                        () = tokio::time::sleep(Duration::from_millis(*delay_ms)) => Ok(value.clone()),
                        () = ctx.cancelled() => Err(tep_reference::pipeline::cancelled_failure()),
                    }
                }
                Body::Fail(msg) => Err(Failure::new(msg.clone())),
                Body::Panic(msg) => panic!("{msg}"),
                Body::Hang => {
                    ctx.cancelled().await;
                    Err(tep_reference::pipeline::cancelled_failure())
                }
                Body::FlakyThenOk(fails) => {
                    if n <= *fails {
                        Err(Failure::new(format!("flaky failure {n}")))
                    } else {
                        Ok(json!("ok"))
                    }
                }
                Body::DeferThenOk(text) => {
                    ctx.defer_context(text.clone());
                    Ok(json!("ok"))
                }
                Body::DeferThenFail(text) => {
                    ctx.defer_context(text.clone());
                    Err(Failure::new("failed after deferring"))
                }
            }
        })
    }

    fn finalizer(&self) -> Option<&dyn tep_reference::pipeline::FinalizeContent> {
        self.finalize
            .as_ref()
            .map(|f| f as &dyn tep_reference::pipeline::FinalizeContent)
    }
}

/// A test tool's `finalizeContent`, from a closure over the candidate.
pub struct Finalizer(Arc<FinalizeFn>);

impl tep_reference::pipeline::FinalizeContent for Finalizer {
    fn finalize_content(
        &self,
        _exec: &tep_reference::execution::Execution,
        candidate: &ToolResult,
    ) -> Result<Option<Vec<ContentBlock>>, Failure> {
        (self.0)(candidate)
    }
}

pub fn call(id: &str, name: &str) -> ModelCall {
    ModelCall::new(id, name, "{\"path\":\"a.txt\"}")
}

/// The stage visits of one call, with the batch-level `allResults` included, as a walk.
pub fn walk(records: &[TraceRecord], call: &str) -> Vec<(NodeId, Option<Outcome>)> {
    records
        .iter()
        .filter_map(|r| match r {
            TraceRecord::Stage(o) if o.node == NodeId::Model => None,
            TraceRecord::Stage(o) if o.call.is_none() => Some((o.node, None)),
            TraceRecord::Stage(o) if o.call.as_ref().map(CallId::as_str) == Some(call) => {
                Some((o.node, o.outcome))
            }
            TraceRecord::Event(e) if e.call.as_ref().map(CallId::as_str) == Some(call) => {
                e.event.body.node().map(|n| (n, None))
            }
            _ => None,
        })
        .fold(Vec::new(), collapse_around)
}

/// Consecutive `around` records of a call are one visit (into the dispatch, back from the body,
/// the waterfall's end); the last one's outcome is the visit's.
pub fn collapse_around(
    mut walk: Vec<(NodeId, Option<Outcome>)>,
    visit: (NodeId, Option<Outcome>),
) -> Vec<(NodeId, Option<Outcome>)> {
    match walk.last_mut() {
        Some(last) if last.0 == NodeId::Around && visit.0 == NodeId::Around => {
            last.1 = visit.1;
        }
        _ => walk.push(visit),
    }
    walk
}

/// The nodes a call visited, in order.
pub fn nodes(records: &[TraceRecord], call: &str) -> Vec<NodeId> {
    walk(records, call).into_iter().map(|(n, _)| n).collect()
}

/// Asserts every call's visits form a walk of the registry's revision graph.
pub fn assert_walks(registry: &ToolRegistry, calls: &[&str]) {
    let graph = StageGraph::of(registry.revision());
    let records = registry.recorder().records();
    for call in calls {
        let mut w = walk(&records, call);
        // A definition without finalizeContent has no finalize stage: the call goes from
        // post-execute (or normalization) straight to tools/result.
        if graph.contains(NodeId::Finalize)
            && !w.iter().any(|v| v.0 == NodeId::Finalize)
            && let Some(k) = w.iter().position(|v| v.0 == NodeId::Final)
        {
            w.insert(k, (NodeId::Finalize, None));
        }
        if let Err((i, err)) = graph.check_walk(NodeId::Model, &w) {
            panic!(
                "call {call}: visit {i} ({:?}) is not a step: {err}\nwalk: {w:?}",
                w[i]
            );
        }
    }
}

/// Positions of records matching `pred`.
pub fn positions(records: &[TraceRecord], pred: impl Fn(&TraceRecord) -> bool) -> Vec<usize> {
    records
        .iter()
        .enumerate()
        .filter(|(_, r)| pred(r))
        .map(|(i, _)| i)
        .collect()
}

pub fn is_stage(node: NodeId, call: &str) -> impl Fn(&TraceRecord) -> bool + '_ {
    move |r| matches!(r, TraceRecord::Stage(o) if o.node == node && o.call.as_ref().map(CallId::as_str) == Some(call))
}

pub fn is_event<'a>(ty: &'a str, call: &'a str) -> impl Fn(&TraceRecord) -> bool + 'a {
    move |r| matches!(r, TraceRecord::Event(e) if e.event.body.type_name() == ty && e.call.as_ref().map(CallId::as_str) == Some(call))
}

pub fn observations(records: &[TraceRecord], node: NodeId, call: &str) -> Vec<Observation> {
    records
        .iter()
        .filter_map(|r| match r {
            TraceRecord::Stage(o)
                if o.node == node && o.call.as_ref().map(CallId::as_str) == Some(call) =>
            {
                Some((**o).clone())
            }
            _ => None,
        })
        .collect()
}

pub fn events_of_type(log: &[SessionEvent], ty: &str) -> Vec<SessionEvent> {
    log.iter()
        .filter(|e| e.body.type_name() == ty)
        .cloned()
        .collect()
}

/// The text of each injected context, in log order.
pub fn injected(log: &[SessionEvent]) -> Vec<String> {
    log.iter()
        .filter_map(|e| match &e.body {
            EventBody::UserMessage(m) => Some(tep_model::result::content_text(&m.content)),
            EventBody::ContextMessage(m) => Some(tep_model::result::content_text(&m.content)),
            _ => None,
        })
        .collect()
}
