//! Synthetic traces the checker accepts, for the streaming tests and the benches
//! (`testing`): built from the model's types alone, so `tep-check`'s own tests need no other
//! crate. `tep_conformance::generate` adds the corpus mix and writes them as JSON Lines.
//!
//! - [`Shape::WideBatch`]: one batch of `n` concurrency-safe calls whose bodies all run at once.
//! - [`Shape::LongProgram`]: one `run_code` call whose program issues `n` sub-calls in turn.
//! - [`Shape::ManyContexts`]: a wide batch whose every call announces contexts, all injected
//!   after the batch settles.
//!
//! They are rev2 traces at level `full` and follow the reference's own record order (a call's
//! prepare stages, its dispatch, then the commits in model order).

use std::convert::Infallible;

use serde_json::{Value, json};
use tep_model::graph::{NodeId, Outcome, Revision};
use tep_model::identity::{CallId, Identity};
use tep_model::result::{AdditionalContext, ContentBlock, ContextOrigin, ToolResult};
use tep_model::session::{
    CodeDispatch, CodeDispatchStart, EventBody, FlatToolResult, MessageSource, Role, SessionEvent,
    SurfaceOp, ToolCallData, ToolResultData, ToolResultRecord, UserMessage,
};
use tep_model::trace::{DeclaredCall, EventRecord, Mark, MarkKind, Observation, TraceRecord};

/// A kind of synthetic trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Shape {
    /// One batch of this many concurrency-safe calls, every body running at once.
    WideBatch(usize),
    /// One `run_code` call whose program issues this many sub-calls, one after the other.
    LongProgram(usize),
    /// One batch of `calls` concurrency-safe calls, each deferring `contexts` contexts.
    ManyContexts {
        /// The calls of the batch.
        calls: usize,
        /// The contexts each call defers.
        contexts: usize,
    },
}

impl Shape {
    /// The revision the trace is checked against.
    pub fn revision(self) -> Revision {
        Revision::Rev2
    }

    /// A short name for bench ids, file names and messages (`wide-batch-1000`).
    pub fn name(self) -> String {
        match self {
            Shape::WideBatch(n) => format!("wide-batch-{n}"),
            Shape::LongProgram(n) => format!("long-program-{n}"),
            Shape::ManyContexts { calls, contexts } => {
                format!("many-contexts-{calls}x{contexts}")
            }
        }
    }
}

/// The records of one copy of `shape`, without a header, its session seqs from 1.
pub fn records(shape: Shape) -> Vec<TraceRecord> {
    let mut out = Vec::new();
    let emitted: Result<(), Infallible> = emit(shape, &mut 0, &mut |r| {
        out.push(r);
        Ok(())
    });
    match emitted {
        Ok(()) => out,
        Err(never) => match never {},
    }
}

/// One copy of `shape` into `sink`, its session seqs after `seq` (left at the last one), so
/// that copies one after the other keep the log increasing.
pub fn emit<E>(
    shape: Shape,
    seq: &mut u64,
    sink: &mut dyn FnMut(TraceRecord) -> Result<(), E>,
) -> Result<(), E> {
    let mut batch = Batch { seq, sink };
    match shape {
        Shape::WideBatch(n) => batch.wide(n, 0),
        Shape::ManyContexts { calls, contexts } => batch.wide(calls, contexts),
        Shape::LongProgram(n) => batch.program(n),
    }
}

/// Builds one batch into a sink.
struct Batch<'s, E> {
    /// The last session seq emitted.
    seq: &'s mut u64,
    sink: &'s mut dyn FnMut(TraceRecord) -> Result<(), E>,
}

const TOOL: &str = "read";
const ARGUMENTS: &str = r#"{"path":"notes.txt"}"#;

fn call_id(i: usize) -> CallId {
    CallId::new(format!("c{i}"))
}

fn text_result(text: &str, contexts: Vec<AdditionalContext>) -> ToolResult {
    ToolResult {
        is_error: false,
        content: vec![ContentBlock::text(text)],
        error: None,
        meta: None,
        additional_contexts: contexts,
        value: None,
    }
}

impl<E> Batch<'_, E> {
    fn stage(&mut self, observation: Observation) -> Result<(), E> {
        (self.sink)(TraceRecord::Stage(Box::new(observation)))
    }

    fn mark(&mut self, call: &CallId, mark: MarkKind, by: &str) -> Result<(), E> {
        (self.sink)(TraceRecord::Mark(Box::new(Mark {
            call: call.clone(),
            mark,
            by: by.to_owned(),
            after_ms: 0,
            rejection: None,
        })))
    }

    /// Appends a session event; returns its seq.
    fn event(
        &mut self,
        call: &CallId,
        body: EventBody,
        sources: Option<Vec<u64>>,
    ) -> Result<u64, E> {
        *self.seq += 1;
        let seq = *self.seq;
        let surface_op = matches!(body, EventBody::ToolResult(_) | EventBody::UserMessage(_))
            .then_some(SurfaceOp::Append);
        (self.sink)(TraceRecord::Event(Box::new(EventRecord {
            call: Some(call.clone()),
            event: SessionEvent {
                seq,
                time: 0,
                body,
                surface_op,
                source_event_seqs: sources,
            },
        })))?;
        Ok(seq)
    }

    fn model(&mut self, calls: Vec<DeclaredCall>) -> Result<(), E> {
        let mut model = Observation::at(NodeId::Model);
        model.calls = Some(calls);
        self.stage(model)
    }

    /// `tool/call` to the body's dispatch; returns the `tool/call` seq.
    fn prepare(&mut self, id: &CallId, identity: &Identity) -> Result<u64, E> {
        let seq = self.event(
            id,
            EventBody::ToolCall(ToolCallData {
                turn: 1,
                step: 1,
                call_id: id.clone(),
                name: identity.name.clone(),
                arguments: ARGUMENTS.to_owned(),
            }),
            None,
        )?;
        self.stage(Observation::at(NodeId::PresentCall).call(id))?;
        self.decide(id, identity, None)?;
        Ok(seq)
    }

    /// Pre-execute and the guards allow, then `tools/execute` dispatches the body.
    fn decide(
        &mut self,
        id: &CallId,
        identity: &Identity,
        parent: Option<&CallId>,
    ) -> Result<(), E> {
        let with_parent = |mut o: Observation| {
            o.parent = parent.cloned();
            o
        };
        let mut pre = Observation::at(NodeId::Pre)
            .call(id)
            .outcome(Outcome::Allow)
            .identity(identity.clone());
        pre.listeners = Some(Vec::new());
        self.stage(with_parent(pre))?;
        let mut guards = Observation::at(NodeId::Guards)
            .call(id)
            .outcome(Outcome::Allow)
            .identity(identity.clone());
        guards.listeners = Some(Vec::new());
        guards.verdicts = Some(Vec::new());
        self.stage(with_parent(guards))?;
        for node in [NodeId::Around, NodeId::ToolBody] {
            let o = Observation::at(node).call(id).identity(identity.clone());
            self.stage(with_parent(o))?;
        }
        Ok(())
    }

    /// The body settles and returns through the wrappers.
    fn settle_body(
        &mut self,
        id: &CallId,
        identity: &Identity,
        result: &ToolResult,
        parent: Option<&CallId>,
    ) -> Result<(), E> {
        self.mark(id, MarkKind::BodySettled, "body")?;
        let mut back = Observation::at(NodeId::Around)
            .call(id)
            .identity(identity.clone())
            .result(result);
        back.parent = parent.cloned();
        self.stage(back)?;
        let mut out = Observation::at(NodeId::Around)
            .call(id)
            .identity(identity.clone());
        out.parent = parent.cloned();
        self.stage(out)
    }

    /// Post-execute accepts and `tools/result` announces the result.
    fn commit(
        &mut self,
        id: &CallId,
        identity: &Identity,
        result: &ToolResult,
        parent: Option<&CallId>,
    ) -> Result<(), E> {
        let mut post = Observation::at(NodeId::Post)
            .call(id)
            .outcome(Outcome::Accept)
            .identity(identity.clone())
            .result(result);
        post.listeners = Some(Vec::new());
        post.parent = parent.cloned();
        self.stage(post)?;
        let mut announced = Observation::at(NodeId::Final)
            .call(id)
            .identity(identity.clone())
            .result(result);
        announced.parent = parent.cloned();
        self.stage(announced)
    }

    /// The recorded `tool/result` of a call of the batch, and its UI card.
    fn record_result(&mut self, id: &CallId, result: &ToolResult, call_seq: u64) -> Result<(), E> {
        self.event(
            id,
            EventBody::ToolResult(ToolResultData::Message(ToolResultRecord::from_flat(
                FlatToolResult {
                    call_id: id.clone(),
                    content: result.content.clone(),
                    is_error: result.is_error,
                    error: None,
                    meta: None,
                },
                1,
            ))),
            Some(vec![call_seq]),
        )?;
        self.stage(Observation::at(NodeId::PresentResult).call(id))
    }

    /// A batch of `n` concurrency-safe calls: each prepares and dispatches its body in turn,
    /// every body runs until all are dispatched, then they settle and commit in model order,
    /// and each call's `contexts` deferred contexts are injected after `allResults`.
    fn wide(&mut self, n: usize, contexts: usize) -> Result<(), E> {
        let ids: Vec<CallId> = (1..=n).map(call_id).collect();
        self.model(
            ids.iter()
                .map(|id| DeclaredCall {
                    call_id: id.clone(),
                    name: TOOL.to_owned(),
                    concurrency_safe: Some(true),
                })
                .collect(),
        )?;
        let arguments: Value = json!({"path": "notes.txt"});
        let identity = |k: usize| Identity {
            token: format!("tok-{}", k + 1),
            call_id: ids[k].clone(),
            name: TOOL.to_owned(),
            arguments: arguments.clone(),
            parent_token: None,
        };
        let deferred = |k: usize| -> Vec<AdditionalContext> {
            (1..=contexts)
                .map(|j| AdditionalContext {
                    origin: ContextOrigin::Tool,
                    text: format!("{} note {j}", ids[k]),
                })
                .collect()
        };
        let mut call_seqs = Vec::with_capacity(n);
        for (k, id) in ids.iter().enumerate() {
            call_seqs.push(self.prepare(id, &identity(k))?);
        }
        let returned = text_result("ok", Vec::new());
        for (k, id) in ids.iter().enumerate() {
            self.settle_body(id, &identity(k), &returned, None)?;
        }
        for (k, id) in ids.iter().enumerate() {
            let result = text_result("ok", deferred(k));
            self.commit(id, &identity(k), &result, None)?;
            self.record_result(id, &result, call_seqs[k])?;
        }
        self.stage(Observation::at(NodeId::AllResults))?;
        for (k, id) in ids.iter().enumerate() {
            for (j, context) in deferred(k).into_iter().enumerate() {
                self.event(
                    id,
                    EventBody::UserMessage(UserMessage {
                        id: format!("context-{id}-{}", j + 1),
                        role: Role::User,
                        content: vec![ContentBlock::text(context.text)],
                        source: MessageSource::Tool {
                            call_id: id.clone(),
                        },
                    }),
                    None,
                )?;
            }
        }
        Ok(())
    }

    /// One `run_code` call whose program issues `n` sub-calls, each allowed, run, announced,
    /// logged and resolved before the next starts.
    fn program(&mut self, n: usize) -> Result<(), E> {
        let root = call_id(1);
        let run_code = tep_model::RUN_CODE;
        self.model(vec![DeclaredCall {
            call_id: root.clone(),
            name: run_code.to_owned(),
            concurrency_safe: Some(false),
        }])?;
        let root_identity = Identity {
            token: "tok-1".to_owned(),
            call_id: root.clone(),
            name: run_code.to_owned(),
            arguments: json!({"path": "notes.txt"}),
            parent_token: None,
        };
        let call_seq = self.prepare(&root, &root_identity)?;
        let returned = text_result("ok", Vec::new());
        for k in 1..=n {
            let sub = root.code_sub_call(k);
            let identity = Identity {
                token: format!("tok-{}", k + 1),
                call_id: sub.clone(),
                name: TOOL.to_owned(),
                arguments: json!({}),
                parent_token: Some(root_identity.token.clone()),
            };
            self.event(
                &sub,
                EventBody::CodeDispatchStart(CodeDispatchStart {
                    root_call_id: root.clone(),
                    parent_call_id: root.clone(),
                    sub_call_id: sub.clone(),
                    name: TOOL.to_owned(),
                    arguments: json!({}),
                }),
                None,
            )?;
            self.decide(&sub, &identity, Some(&root))?;
            self.settle_body(&sub, &identity, &returned, Some(&root))?;
            self.commit(&sub, &identity, &returned, Some(&root))?;
            self.event(
                &sub,
                EventBody::CodeDispatch(CodeDispatch {
                    root_call_id: Some(root.clone()),
                    parent_call_id: root.clone(),
                    sub_call_id: sub.clone(),
                    name: TOOL.to_owned(),
                    arguments: json!({}),
                    is_error: false,
                    content: Some(returned.content.clone()),
                    result_summary: None,
                }),
                None,
            )?;
            self.mark(&sub, MarkKind::BindingResolved, "program")?;
        }
        let done = text_result("done", Vec::new());
        self.mark(&root, MarkKind::BodySettled, "program")?;
        let mut back = Observation::at(NodeId::Around)
            .call(&root)
            .identity(root_identity.clone())
            .result(&done);
        back.parent = None;
        self.stage(back)?;
        self.stage(
            Observation::at(NodeId::Around)
                .call(&root)
                .identity(root_identity.clone()),
        )?;
        self.commit(&root, &root_identity, &done, None)?;
        self.record_result(&root, &done, call_seq)?;
        self.stage(Observation::at(NodeId::AllResults))
    }
}
