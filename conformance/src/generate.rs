//! Synthetic traces for benchmarks and load tests, each one a trace the checker accepts.
//!
//! - [`Shape::CorpusMix`]: every scenario of the corpus that runs in the revision, run on the
//!   reference, one batch after the other: the mix of records real runs produce.
//! - [`Shape::WideBatch`]: one batch of `n` concurrency-safe calls whose bodies all run at once.
//! - [`Shape::LongProgram`]: one `run_code` call whose program issues `n` sub-calls in turn.
//! - [`Shape::ManyContexts`]: a wide batch whose every call announces contexts, all injected
//!   after the batch settles.
//!
//! The built shapes are rev2 traces at level `full` and follow the reference's own record
//! order (a call's prepare stages, its dispatch, then the commits in model order). Repeating a
//! shape ([`write_jsonl`]) renumbers the session seqs so the log stays increasing; call ids repeat
//! from one batch to the next, as they may in a real session. Nothing here is timed: the
//! benches time what these traces cost, and the tests count work on them.

use std::io::{self, Write};

use serde_json::{Value, json};
use tep_model::graph::{NodeId, Outcome, Revision};
use tep_model::identity::{CallId, Identity};
use tep_model::result::{AdditionalContext, ContentBlock, ContextOrigin, ToolResult};
use tep_model::session::{
    CodeDispatch, CodeDispatchStart, EventBody, MessageSource, Role, SessionEvent, SurfaceOp,
    ToolCallData, ToolResultBlock, ToolResultBlockType, ToolResultData, ToolResultMessage,
    ToolResultRecord, UserMessage,
};
use tep_model::trace::{
    DeclaredCall, EventRecord, Mark, MarkKind, Observation, ObservationLevel, TraceHeader,
    TraceRecord,
};

use crate::scenario::corpus;
use crate::scripted::run_reference;

/// A kind of synthetic trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// The corpus scenarios of the revision, run on the reference, one batch each.
    CorpusMix(Revision),
    /// One batch of this many concurrency-safe calls, every body running at once.
    WideBatch(usize),
    /// One `run_code` call whose program issues this many sub-calls, one after the other.
    LongProgram(usize),
    /// One batch of `calls` concurrency-safe calls, each deferring `contexts` contexts.
    ManyContexts { calls: usize, contexts: usize },
}

impl Shape {
    /// The revision the trace is checked against.
    pub fn revision(self) -> Revision {
        match self {
            Shape::CorpusMix(revision) => revision,
            _ => Revision::Rev2,
        }
    }

    /// A short name for bench ids and file names (`wide-batch-1000`).
    pub fn name(self) -> String {
        match self {
            Shape::CorpusMix(revision) => format!("corpus-mix-{revision}"),
            Shape::WideBatch(n) => format!("wide-batch-{n}"),
            Shape::LongProgram(n) => format!("long-program-{n}"),
            Shape::ManyContexts { calls, contexts } => {
                format!("many-contexts-{calls}x{contexts}")
            }
        }
    }
}

/// Why a trace could not be generated.
#[derive(Debug, thiserror::Error)]
pub enum GenerateError {
    /// A corpus scenario did not run on the reference.
    #[error("the corpus does not run on the reference: {0}")]
    Corpus(String),
    #[error("cannot write the trace: {0}")]
    Io(#[from] io::Error),
}

/// The records of one copy of `shape`, without a header.
pub fn records(shape: Shape) -> Result<Vec<TraceRecord>, GenerateError> {
    let mut out = Vec::new();
    Generator::new(shape)?.emit(&mut |r| {
        out.push(r);
        Ok(())
    })?;
    Ok(out)
}

/// `times` copies of `shape` as JSON Lines, after a header line naming its revision. Returns
/// how many records (header included) were written. Streams: one copy of a built shape is never
/// held in memory, so a 10⁷-record trace costs what one record costs.
pub fn write_jsonl(shape: Shape, times: usize, out: impl Write) -> Result<u64, GenerateError> {
    let mut out = io::BufWriter::with_capacity(1 << 16, out);
    let mut generator = Generator::new(shape)?;
    let mut written = 0u64;
    let mut write = |record: TraceRecord| -> Result<(), GenerateError> {
        serde_json::to_writer(&mut out, &record).map_err(io::Error::from)?;
        out.write_all(b"\n")?;
        written += 1;
        Ok(())
    };
    write(TraceRecord::Header(TraceHeader {
        spec: shape.revision(),
        implementation: Some("tep generate".to_owned()),
        capabilities: None,
        observation: Some(ObservationLevel::Full),
    }))?;
    for _ in 0..times {
        generator.emit(&mut write)?;
    }
    out.flush()?;
    Ok(written)
}

/// [`write_jsonl`] into a string.
pub fn jsonl(shape: Shape, times: usize) -> Result<String, GenerateError> {
    let mut bytes = Vec::new();
    write_jsonl(shape, times, &mut bytes)?;
    // serde_json writes UTF-8 only.
    String::from_utf8(bytes).map_err(|e| GenerateError::Io(io::Error::other(e)))
}

type Sink<'a> = dyn FnMut(TraceRecord) -> Result<(), GenerateError> + 'a;

/// Emits copies of a shape, keeping the session log's seq increasing from one to the next.
struct Generator {
    shape: Shape,
    /// The corpus runs, for [`Shape::CorpusMix`].
    corpus: Vec<TraceRecord>,
    /// The last seq emitted.
    seq: u64,
}

impl Generator {
    fn new(shape: Shape) -> Result<Self, GenerateError> {
        let corpus = match shape {
            Shape::CorpusMix(revision) => corpus_runs(revision)?,
            _ => Vec::new(),
        };
        Ok(Generator {
            shape,
            corpus,
            seq: 0,
        })
    }

    fn emit(&mut self, sink: &mut Sink<'_>) -> Result<(), GenerateError> {
        match self.shape {
            Shape::CorpusMix(_) => {
                let base = self.seq;
                for record in &self.corpus {
                    let mut record = record.clone();
                    if let TraceRecord::Event(e) = &mut record {
                        e.event.seq += base;
                        if let Some(sources) = e.event.source_event_seqs.as_mut() {
                            sources.iter_mut().for_each(|s| *s += base);
                        }
                        self.seq = self.seq.max(e.event.seq);
                    }
                    sink(record)?;
                }
                Ok(())
            }
            Shape::WideBatch(n) => Batch::new(self, sink).wide(n, 0),
            Shape::ManyContexts { calls, contexts } => Batch::new(self, sink).wide(calls, contexts),
            Shape::LongProgram(n) => Batch::new(self, sink).program(n),
        }
    }
}

/// Every scenario of the corpus that runs in `revision`, run on the reference, headers dropped.
fn corpus_runs(revision: Revision) -> Result<Vec<TraceRecord>, GenerateError> {
    let scenarios = corpus().map_err(|e| GenerateError::Corpus(e.to_string()))?;
    let mut out = Vec::new();
    let mut last_seq = 0;
    for scenario in scenarios.iter().filter(|s| s.revisions.contains(&revision)) {
        let base = last_seq;
        for mut record in run_reference(scenario, revision, &[]).map_err(GenerateError::Corpus)? {
            match &mut record {
                TraceRecord::Header(_) => continue,
                TraceRecord::Event(e) => {
                    e.event.seq += base;
                    if let Some(sources) = e.event.source_event_seqs.as_mut() {
                        sources.iter_mut().for_each(|s| *s += base);
                    }
                    last_seq = e.event.seq;
                }
                _ => {}
            }
            out.push(record);
        }
    }
    Ok(out)
}

/// Builds one batch into a sink.
struct Batch<'g, 's, 'a> {
    generator: &'g mut Generator,
    sink: &'s mut Sink<'a>,
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

impl<'g, 's, 'a> Batch<'g, 's, 'a> {
    fn new(generator: &'g mut Generator, sink: &'s mut Sink<'a>) -> Self {
        Batch { generator, sink }
    }

    fn stage(&mut self, observation: Observation) -> Result<(), GenerateError> {
        (self.sink)(TraceRecord::Stage(Box::new(observation)))
    }

    fn mark(&mut self, call: &CallId, mark: MarkKind, by: &str) -> Result<(), GenerateError> {
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
    ) -> Result<u64, GenerateError> {
        self.generator.seq += 1;
        let seq = self.generator.seq;
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

    fn model(&mut self, calls: Vec<DeclaredCall>) -> Result<(), GenerateError> {
        let mut model = Observation::at(NodeId::Model);
        model.calls = Some(calls);
        self.stage(model)
    }

    /// `tool/call` to the body's dispatch; returns the `tool/call` seq.
    fn prepare(&mut self, id: &CallId, identity: &Identity) -> Result<u64, GenerateError> {
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
    ) -> Result<(), GenerateError> {
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
    ) -> Result<(), GenerateError> {
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
    ) -> Result<(), GenerateError> {
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
    fn record_result(
        &mut self,
        id: &CallId,
        result: &ToolResult,
        call_seq: u64,
    ) -> Result<(), GenerateError> {
        self.event(
            id,
            EventBody::ToolResult(ToolResultData::Message(ToolResultRecord {
                turn: 1,
                step: 1,
                message: ToolResultMessage {
                    id: format!("result-{id}"),
                    role: Role::User,
                    source: MessageSource::Tool {
                        call_id: id.clone(),
                    },
                    content: vec![ToolResultBlock {
                        kind: ToolResultBlockType::ToolResult,
                        tool_call_id: id.clone(),
                        content: result.content.clone(),
                        is_error: result.is_error,
                    }],
                },
                error: None,
                meta: None,
            })),
            Some(vec![call_seq]),
        )?;
        self.stage(Observation::at(NodeId::PresentResult).call(id))
    }

    /// A batch of `n` concurrency-safe calls: each prepares and dispatches its body in turn,
    /// every body runs until all are dispatched, then they settle and commit in model order,
    /// and each call's `contexts` deferred contexts are injected after `allResults`.
    fn wide(&mut self, n: usize, contexts: usize) -> Result<(), GenerateError> {
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
    fn program(&mut self, n: usize) -> Result<(), GenerateError> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use tep_check::read_records;
    use tep_check::{CheckOptions, check_records};

    fn clean(shape: Shape) {
        let records = records(shape).unwrap_or_else(|e| panic!("{e}"));
        let report = check_records(&CheckOptions::new(shape.revision()), &records)
            .unwrap_or_else(|e| panic!("{}: {e}", shape.name()));
        assert!(
            report.violations.is_empty(),
            "{}: {:?}",
            shape.name(),
            report.violations.first()
        );
        assert!(report.batches >= 1);
    }

    #[test]
    fn every_built_shape_is_a_clean_trace() {
        clean(Shape::WideBatch(1));
        clean(Shape::WideBatch(7));
        clean(Shape::LongProgram(1));
        clean(Shape::LongProgram(7));
        clean(Shape::ManyContexts {
            calls: 5,
            contexts: 3,
        });
    }

    #[test]
    fn the_corpus_mix_is_clean_in_both_revisions() {
        for revision in Revision::ALL {
            clean(Shape::CorpusMix(revision));
        }
    }

    #[test]
    fn repeated_copies_keep_the_log_increasing_and_read_back() {
        let shape = Shape::ManyContexts {
            calls: 3,
            contexts: 2,
        };
        let text = jsonl(shape, 4).unwrap_or_else(|e| panic!("{e}"));
        let records = read_records(text.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
        let one = super::records(shape).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(records.len(), 1 + 4 * one.len());
        let report = check_records(&CheckOptions::new(Revision::Rev2), &records)
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(
            report.violations.is_empty(),
            "{:?}",
            report.violations.first()
        );
        assert_eq!(report.batches, 4);
    }
}
