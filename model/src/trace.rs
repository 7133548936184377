//! Traces: the session events and the stage observations of a run, in the order they happened.
//!
//! A trace is what the conformance checker reads (one [`TraceRecord`] per JSON line). Every stage
//! visit is an observation tagged with its graph node and call id; the nodes that *are* session
//! events (`toolCall`, `toolResult`, `owned`, `context`) are observed through the event itself.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::graph::{NodeId, Outcome, Revision};
use crate::identity::{CallId, Identity};
use crate::result::ToolResult;
use crate::session::{EventBody as SessionEventBody, SessionEvent};

/// One line of a trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum TraceRecord {
    /// Optional first line: what produced the trace.
    Header(TraceHeader),
    /// A stage visit.
    Stage(Box<Observation>),
    /// A session event appended to the log.
    Event(Box<EventRecord>),
    /// Something a scripted part did that is not a stage visit.
    Mark(Box<Mark>),
    /// The model's next request after a batch, as the model's boundary received it (level
    /// `boundary`).
    Request(Box<NextRequest>),
}

impl TraceRecord {
    /// The graph node this record observes, if any.
    pub fn node(&self) -> Option<NodeId> {
        match self {
            TraceRecord::Stage(o) => Some(o.node),
            TraceRecord::Event(e) => e.event.body.node(),
            TraceRecord::Header(_) | TraceRecord::Mark(_) | TraceRecord::Request(_) => None,
        }
    }

    /// The call this record belongs to, if any.
    pub fn call(&self) -> Option<&CallId> {
        match self {
            TraceRecord::Stage(o) => o.call.as_ref(),
            TraceRecord::Event(e) => e.call.as_ref(),
            TraceRecord::Mark(m) => Some(&m.call),
            TraceRecord::Header(_) | TraceRecord::Request(_) => None,
        }
    }
}

/// What produced a trace. When present it is the first line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TraceHeader {
    /// The spec revision the implementation follows.
    pub spec: Revision,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub implementation: Option<String>,
    /// The optional parts the implementation has; invariants about parts it lacks are N/A.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<Vec<Capability>>,
    /// Which records the trace holds (docs/conformance.md#observation-levels); `tep check`
    /// assumes `hooks` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observation: Option<ObservationLevel>,
}

/// How much of a run a trace shows. Each level includes the one before it; invariants whose
/// records a level lacks are reported as not checkable, never as passed.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum ObservationLevel {
    /// Session events only: what every harness already logs (`tool/call`, `tool/result`, the
    /// injected contexts, approval audit, tool-owned events), plus the batch (`model`).
    Events,
    /// Plus what the harness's public boundaries show: the model's next request after each
    /// batch (a `request` record: the tool messages and the messages after them, as sent).
    Boundary,
    /// Plus the records made at public extension points: the waterfalls' listeners, approval
    /// when a prompt is mounted, guards, the execute wrappers' dispatch, the body, the
    /// definition's `finalizeContent` when it has one, `tools/result` observers, the UI cards.
    Hooks,
    /// Plus the records only the pipeline itself can make (`denied`, `normalized`,
    /// `allResults`, approval `unavailable` without a prompt): everything the reference emits.
    Full,
}

impl ObservationLevel {
    pub const ALL: [ObservationLevel; 4] = [
        ObservationLevel::Events,
        ObservationLevel::Boundary,
        ObservationLevel::Hooks,
        ObservationLevel::Full,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ObservationLevel::Events => "events",
            ObservationLevel::Boundary => "boundary",
            ObservationLevel::Hooks => "hooks",
            ObservationLevel::Full => "full",
        }
    }
}

impl std::fmt::Display for ObservationLevel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The error for an observation level name that does not exist.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown observation level `{0}` (one of: events, boundary, hooks, full)")]
pub struct UnknownObservationLevel(pub String);

impl std::str::FromStr for ObservationLevel {
    type Err = UnknownObservationLevel;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ObservationLevel::ALL
            .into_iter()
            .find(|l| l.as_str() == s)
            .ok_or_else(|| UnknownObservationLevel(s.to_owned()))
    }
}

/// An optional part of a pipeline. Scenarios and invariants that need a part an implementation
/// does not declare are reported N/A, not failed.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Capability {
    /// A mountable `ctx.approval` prompt.
    Approval,
    /// The `fs/write-intent` / `fs/edit-intent` gate with read-before-edit.
    FsGate,
    /// Concurrency-safe calls whose bodies overlap.
    Parallel,
    /// Tool-owned session events (`todo/write`, `hook/*`, `fs/observed`).
    OwnedEvents,
    /// The UI cards `presentCall` / `presentResult`.
    Ui,
    /// Code Mode: `run_code` and its sub-calls.
    CodeMode,
}

impl Capability {
    pub const ALL: [Capability; 6] = [
        Capability::Approval,
        Capability::FsGate,
        Capability::Parallel,
        Capability::OwnedEvents,
        Capability::Ui,
        Capability::CodeMode,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Capability::Approval => "approval",
            Capability::FsGate => "fs-gate",
            Capability::Parallel => "parallel",
            Capability::OwnedEvents => "owned-events",
            Capability::Ui => "ui",
            Capability::CodeMode => "code-mode",
        }
    }
}

/// The error for a capability name that does not exist.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown capability `{0}` (one of: approval, fs-gate, parallel, owned-events, ui, code-mode)"
)]
pub struct UnknownCapability(pub String);

impl std::str::FromStr for Capability {
    type Err = UnknownCapability;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Capability::ALL
            .into_iter()
            .find(|c| c.as_str() == s)
            .ok_or_else(|| UnknownCapability(s.to_owned()))
    }
}

impl std::fmt::Display for Capability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A scripted part's own report, for facts no stage visit shows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Mark {
    pub call: CallId,
    pub mark: MarkKind,
    /// The scripted part that reports it.
    pub by: String,
    /// `observer-settled`: how long the observer's asynchronous work took, in milliseconds.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub after_ms: u64,
    /// `binding-rejected`: what the program was handed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rejection: Option<Rejection>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum MarkKind {
    /// A `tools/result` observer's asynchronous work finished.
    ObserverSettled,
    /// A Code Mode binding call resolved in the program (the sub-call succeeded).
    BindingResolved,
    /// A Code Mode binding call rejected in the program (the sub-call was denied or failed).
    BindingRejected,
    /// A tool body's steps ended: it returned, threw, or stopped after its cancellation.
    BodySettled,
}

/// What a Code Mode program was handed by a denied or failed sub-call: the tool and a message,
/// and (a breach) anything else the rejection carried.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Rejection {
    pub tool_name: String,
    pub message: String,
    /// Any other field of the rejection the program could read (there should be none).
    #[serde(flatten)]
    pub other: std::collections::BTreeMap<String, serde_json::Value>,
}

/// A session event as a trace line: the event, and the call it belongs to. Events such as
/// `todo/write` carry no call id of their own; the trace attributes them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EventRecord {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call: Option<CallId>,
    pub event: SessionEvent,
}

/// The request a harness sends the model after a batch: the messages that follow the assistant
/// message declaring the batch, in the order sent (its tool messages, then what it injected).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NextRequest {
    pub messages: Vec<RequestMessage>,
}

/// One message of the model's next request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RequestMessage {
    pub role: RequestRole,
    /// A tool message's call id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<CallId>,
    /// Its text, as sent (a list of text parts joined without a separator).
    pub content: String,
}

impl RequestMessage {
    /// A tool message for `call`.
    pub fn tool(call: &CallId, content: impl Into<String>) -> Self {
        RequestMessage {
            role: RequestRole::Tool,
            call_id: Some(call.clone()),
            content: content.into(),
        }
    }

    /// A message of another role.
    pub fn of(role: RequestRole, content: impl Into<String>) -> Self {
        RequestMessage {
            role,
            call_id: None,
            content: content.into(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum RequestRole {
    Tool,
    User,
    System,
    Assistant,
}

impl NextRequest {
    /// The request a harness that replays its session log would send after each batch of
    /// `records`: each batch's `tool/result` contents in log order, then its injected contexts
    /// in log order. The checkability measurement gives the reference's traces these (the
    /// reference has no model loop), and tests build breaches from them.
    pub fn of_session(records: &[TraceRecord]) -> Vec<(usize, NextRequest)> {
        let mut out: Vec<(usize, NextRequest)> = Vec::new();
        // The open batch: its declared calls and the request so far.
        let mut open: Option<(Vec<CallId>, NextRequest)> = None;
        for (i, record) in records.iter().enumerate() {
            if let TraceRecord::Stage(o) = record
                && o.node == NodeId::Model
            {
                if let Some((_, request)) = open.take() {
                    out.push((i, request));
                }
                let calls = o.calls.iter().flatten().map(|d| d.call_id.clone());
                open = Some((calls.collect(), NextRequest::default()));
                continue;
            }
            let (TraceRecord::Event(e), Some((calls, request))) = (record, open.as_mut()) else {
                continue;
            };
            let text =
                |content: &[crate::result::ContentBlock]| crate::result::content_text(content);
            match &e.event.body {
                // Only the calls the model declared answer it: a Code Mode sub-call's result
                // is not model-facing.
                SessionEventBody::ToolResult(data) => {
                    if let Some(call) = data.call_id().filter(|c| calls.contains(c)) {
                        let message = RequestMessage::tool(call, text(&data.content()));
                        request.messages.push(message);
                    }
                }
                SessionEventBody::UserMessage(m) => {
                    let message = RequestMessage::of(RequestRole::User, text(&m.content));
                    request.messages.push(message);
                }
                SessionEventBody::ContextMessage(m) => {
                    let message = RequestMessage::of(RequestRole::User, text(&m.content));
                    request.messages.push(message);
                }
                _ => {}
            }
        }
        if let Some((_, request)) = open {
            out.push((records.len(), request));
        }
        out
    }

    /// `records` with each batch's [`NextRequest::of_session`] after its last record.
    pub fn add_to(records: &[TraceRecord]) -> Vec<TraceRecord> {
        let mut out = records.to_vec();
        for (at, request) in NextRequest::of_session(records).into_iter().rev() {
            out.insert(at, TraceRecord::Request(Box::new(request)));
        }
        out
    }
}

/// A stage visit. Which fields a node fills is listed in `docs/trace-format.md`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Observation {
    /// The stage-graph node visited.
    pub node: NodeId,
    /// The call, for per-call nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call: Option<CallId>,
    /// How the visit ended; selects the labeled edge taken next. Required at nodes whose every
    /// outgoing edge is labeled (`pre`, `guards`, `approval`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<Outcome>,
    /// The reason of a denial or refusal, or the message of a throw.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The call identity the stage was handed.
    // Shared: a call's stages all record one identity, and the single-pass reader hands out
    // one copy of it for every stage that repeats its text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<Arc<Identity>>,
    /// Waterfall listeners (or guards) that ran, in the order they were entered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listeners: Option<Vec<String>>,
    /// `guards`: each guard's verdict, in the order they ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdicts: Option<Vec<GuardVerdictRecord>>,
    /// `fsGate`: the intent that was gated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intent: Option<FsIntentRecord>,
    /// `post`: the result it was handed; `finalize`: the candidate; `final`: the frozen outcome.
    // Shared, as `identity` is: a call's later stages repeat one result, and the single-pass
    // reader hands out one copy of it for every stage that repeats its text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Arc<ToolResult>>,
    /// `model`: the batch, in model order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calls: Option<Vec<DeclaredCall>>,
    /// The `run_code` call a Code Mode sub-call was issued from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<CallId>,
}

impl Observation {
    /// A visit of `node` with every optional field empty.
    pub fn at(node: NodeId) -> Self {
        Observation {
            node,
            call: None,
            outcome: None,
            reason: None,
            identity: None,
            listeners: None,
            verdicts: None,
            intent: None,
            result: None,
            calls: None,
            parent: None,
        }
    }

    pub fn call(mut self, call: &CallId) -> Self {
        self.call = Some(call.clone());
        self
    }

    pub fn outcome(mut self, outcome: Outcome) -> Self {
        self.outcome = Some(outcome);
        self
    }

    pub fn reason(mut self, reason: impl Into<String>) -> Self {
        self.reason = Some(reason.into());
        self
    }

    pub fn identity(mut self, identity: Identity) -> Self {
        self.identity = Some(Arc::new(identity));
        self
    }

    /// Its result, to change in place: a copy of its own first if another record shares it
    /// (the trace reader shares a result that later stages repeat).
    pub fn result_mut(&mut self) -> Option<&mut ToolResult> {
        self.result.as_mut().map(Arc::make_mut)
    }

    /// Records a result as it persists: without the execution-local `value`.
    pub fn result(mut self, result: &ToolResult) -> Self {
        self.result = Some(Arc::new(ToolResult {
            value: None,
            ..result.clone()
        }));
        self
    }
}

/// A call of the batch as the `model` observation declares it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeclaredCall {
    pub call_id: CallId,
    pub name: String,
    /// Whether the call may overlap other concurrency-safe calls in `tools/execute`. Absent when
    /// the recording does not know; the rules about overlap and barriers then skip the call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency_safe: Option<bool>,
}

/// A guard's verdict. There is no allow: a guard denies or abstains.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GuardVerdictRecord {
    pub guard: String,
    pub verdict: GuardVerdictKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum GuardVerdictKind {
    Abstain,
    Deny,
    Throw,
    /// The guard tried to allow. Guards are monotonic: the pipeline treats it as abstaining.
    Allow,
}

/// A filesystem mutation presented to the `fs/write-intent` / `fs/edit-intent` gate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FsIntentRecord {
    pub intent: FsIntentKind,
    pub target: String,
    /// The file's version on disk when the intent was gated; absent for a missing file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum FsIntentKind {
    /// `fs/write-intent`: create or overwrite.
    Write,
    /// `fs/edit-intent`: change an existing file.
    Edit,
}

impl FsIntentKind {
    pub fn event_name(self) -> &'static str {
        match self {
            FsIntentKind::Write => "fs/write-intent",
            FsIntentKind::Edit => "fs/edit-intent",
        }
    }
}

/// Serializes records as JSON Lines (one record per line, each line ending in `\n`).
pub fn to_jsonl(records: &[TraceRecord]) -> String {
    let mut out = String::new();
    for record in records {
        // Serializing these types cannot fail: every map key is a string.
        if let Ok(line) = serde_json::to_string(record) {
            out.push_str(&line);
            out.push('\n');
        }
    }
    out
}

impl TraceRecord {
    /// Reads one record of JSON in a single pass, when it leads with its tag: `kind` is its first
    /// field and an event's `type` comes before its `data` (the order this crate writes them).
    ///
    /// Any other line is declined (`None`), even one [`serde_json::from_str`] accepts (a tag
    /// further on, a repeated field, an unknown envelope field, a header): callers fall back on
    /// the general path then. Whenever this reads a record, the general path reads the same
    /// record. It exists for speed: it walks the line's bytes once, straight into the record,
    /// where the derived `Deserialize` of the internally tagged and flattened enums buffers every
    /// field before it knows the variant.
    #[inline]
    pub fn from_json_tag_first(text: &str) -> Option<TraceRecord> {
        single_pass::read(text)
    }
}

/// A session event read in one typed pass, as [`TraceRecord::from_json_tag_first`] reads it
/// inside `{"kind":"event","event":...}` (without a `call`): `None` where that declines.
#[inline]
pub fn session_event_type_first(text: &str) -> Option<SessionEvent> {
    single_pass::read_event(text, false)
}

/// A session event read in one typed pass as [`session_event_type_first`] reads it, and only
/// when [`crate::strict_json::value_from_str`] accepts the whole line (no key named twice
/// anywhere): `None` where either declines. One pass both checks the line and reads it.
#[inline]
pub fn session_event_strict(text: &str) -> Option<SessionEvent> {
    single_pass::read_event(text, true)
}

/// [`session_event_type_first`], as an event record of no call: the event is read straight
/// into the box a [`TraceRecord::Event`] holds, where building it and then boxing it would
/// copy it (240 bytes) on the way.
#[inline]
pub fn event_record_type_first(text: &str) -> Option<Box<EventRecord>> {
    single_pass::read_event_record(text, false)
}

/// [`session_event_strict`], as an event record of no call, as [`event_record_type_first`]
/// reads it.
#[inline]
pub fn event_record_strict(text: &str) -> Option<Box<EventRecord>> {
    single_pass::read_event_record(text, true)
}

mod recent;
mod scanner;
mod single_pass;
#[cfg(test)]
mod strict_props;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeated_identity_is_read_once_and_shared() {
        let line = |arguments: &str| {
            format!(
                r#"{{"kind":"stage","node":"around","call":"c1","identity":{{"token":"tok-1","callId":"c1","name":"read","arguments":{arguments}}}}}"#
            )
        };
        let identity = |line: &str| match TraceRecord::from_json_tag_first(line) {
            Some(TraceRecord::Stage(o)) => o.identity.unwrap_or_else(|| panic!("{line}")),
            other => panic!("{other:?}: {line}"),
        };
        let (a, b) = (line(r#"{"path":"a"}"#), line(r#"{"path":"ab"}"#));
        let first = identity(&a);
        // The same text again (after another call's identity): the same value, not a copy.
        let other = identity(&b);
        let again = identity(&a);
        assert!(Arc::ptr_eq(&first, &again));
        assert!(!Arc::ptr_eq(&first, &other));
        // Each as the general path reads it: a text that shares a long prefix is not a hit.
        for (line, read) in [(&a, &first), (&b, &other)] {
            let general: TraceRecord =
                serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
            let TraceRecord::Stage(o) = general else {
                panic!("{line}");
            };
            assert_eq!(o.identity.as_ref(), Some(read));
        }
        assert_eq!(other.arguments, serde_json::json!({"path": "ab"}));
    }

    #[test]
    fn a_repeated_result_is_read_once_and_shared() {
        let line = |node: &str, text: &str| {
            format!(
                r#"{{"kind":"stage","node":"{node}","call":"c1","result":{{"isError":false,"content":[{{"type":"text","text":"{text}"}}]}}}}"#
            )
        };
        let result = |line: &str| match TraceRecord::from_json_tag_first(line) {
            Some(TraceRecord::Stage(o)) => o.result.unwrap_or_else(|| panic!("{line}")),
            other => panic!("{other:?}: {line}"),
        };
        let (post, fin) = (line("post", "hello"), line("final", "hello"));
        let longer = line("finalize", "hello!");
        let first = result(&post);
        // The same text at another stage (after another result): the same value, not a copy.
        let other = result(&longer);
        let again = result(&fin);
        assert!(Arc::ptr_eq(&first, &again));
        assert!(!Arc::ptr_eq(&first, &other));
        // Each as the general path reads it: a text that shares a long prefix is not a hit,
        // nor is a result that is `null`.
        for (line, read) in [(&post, &first), (&longer, &other), (&fin, &first)] {
            let general: TraceRecord =
                serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
            let TraceRecord::Stage(o) = general else {
                panic!("{line}");
            };
            assert_eq!(o.result.as_ref(), Some(read));
        }
        assert_eq!(
            other.content,
            vec![crate::result::ContentBlock::text("hello!")]
        );
        // Changing one record's result leaves the record it was shared with as it was.
        let (Some(TraceRecord::Stage(mut changed)), Some(TraceRecord::Stage(kept))) = (
            TraceRecord::from_json_tag_first(&post),
            TraceRecord::from_json_tag_first(&fin),
        ) else {
            panic!("{post} {fin}");
        };
        changed
            .result_mut()
            .unwrap_or_else(|| panic!("{post}"))
            .is_error = true;
        assert_eq!(kept.result.as_deref(), Some(&*first));
        assert!(changed.result.as_ref().is_some_and(|r| r.is_error));
        let null = r#"{"kind":"stage","node":"final","call":"c1","result":null}"#;
        let Some(TraceRecord::Stage(o)) = TraceRecord::from_json_tag_first(null) else {
            panic!("{null}");
        };
        assert_eq!(o.result, None);
        let mut o = o;
        assert!(o.result_mut().is_none());
    }

    /// A raw control character, a quote or a backslash is found wherever it stands: in the eight
    /// bytes read at once, in the bytes after the last eight, and at the end of the line.
    #[test]
    fn every_byte_that_ends_a_plain_string_is_found_at_every_offset() {
        let line = |reason: &str, tail: &str| {
            format!(r#"{{"kind":"stage","node":"pre","call":"c1","reason":"{reason}"{tail}"#)
        };
        for tail in ["}", r#","outcome":"deny"}"#] {
            for len in 0..20 {
                let plain = "r".repeat(len);
                let read = TraceRecord::from_json_tag_first(&line(&plain, tail));
                let Some(TraceRecord::Stage(o)) = read else {
                    panic!("{len}: {read:?}");
                };
                assert_eq!(o.reason.as_deref(), Some(plain.as_str()));
                for at in 0..=len {
                    for (bad, general_reads_it) in [
                        ("\u{1}", false),
                        ("\u{1f}", false),
                        ("\"", false),
                        ("\\n", true),
                        ("\\\"", true),
                        ("\\\\", true),
                    ] {
                        let reason = format!("{}{bad}{}", &plain[..at], &plain[at..]);
                        let text = line(&reason, tail);
                        let fast = TraceRecord::from_json_tag_first(&text);
                        let general = serde_json::from_str::<TraceRecord>(&text).ok();
                        assert_eq!(general.is_some(), general_reads_it, "{text}");
                        // An escape is read (or declined); a raw control character never is.
                        assert!(fast.is_none() || fast == general, "{text}");
                        if !general_reads_it {
                            assert!(fast.is_none(), "{text}");
                        }
                    }
                }
            }
        }
    }

    /// Two batches: each gets its own request after its last record, holding its results in
    /// log order and then its contexts; a result of a call the batch did not declare is left
    /// out. The record reads back as written, through the general path.
    #[test]
    fn each_batch_gets_the_request_its_log_would_send() {
        let model = |calls: &str| format!(r#"{{"kind":"stage","node":"model","calls":[{calls}]}}"#);
        let declared = |id: &str| format!(r#"{{"callId":"{id}","name":"fetch"}}"#);
        let result = |seq: u64, id: &str, text: &str, error: bool| {
            format!(
                r#"{{"kind":"event","call":"{id}","event":{{"seq":{seq},"time":0,"type":"tool/result","data":{{"turn":1,"step":1,"message":{{"id":"r-{id}","role":"user","source":{{"kind":"tool","callId":"{id}"}},"content":[{{"type":"tool-result","toolCallId":"{id}","content":[{{"type":"text","text":"{text}"}}],"isError":{error}}}]}}}}}}}}"#
            )
        };
        let context = |seq: u64, id: &str, text: &str| {
            format!(
                r#"{{"kind":"event","call":"{id}","event":{{"seq":{seq},"time":0,"type":"user/message","data":{{"id":"x-{seq}","role":"user","content":[{{"type":"text","text":"{text}"}}],"source":{{"kind":"tool","callId":"{id}"}}}}}}}}"#
            )
        };
        let lines = [
            model(&format!("{},{}", declared("c1"), declared("c2"))),
            result(1, "c2", "Error: no", true),
            result(2, "zz", "not declared", false),
            result(3, "c1", "ok", false),
            context(4, "c1", "first"),
            model(&declared("c3")),
            result(5, "c3", "three", false),
        ];
        let records: Vec<TraceRecord> = lines
            .iter()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect();
        let with = NextRequest::add_to(&records);
        let at: Vec<usize> = (0..with.len())
            .filter(|&i| matches!(with[i], TraceRecord::Request(_)))
            .collect();
        assert_eq!(at, [5, 8], "after each batch's last record");
        let TraceRecord::Request(first) = &with[5] else {
            unreachable!()
        };
        let c = |id: &str| CallId::new(id.to_owned());
        assert_eq!(
            first.messages,
            [
                RequestMessage::tool(&c("c2"), "Error: no"),
                RequestMessage::tool(&c("c1"), "ok"),
                RequestMessage::of(RequestRole::User, "first"),
            ]
        );
        let line = serde_json::to_string(&with[5]).unwrap_or_default();
        assert_eq!(
            line,
            r#"{"kind":"request","messages":[{"role":"tool","callId":"c2","content":"Error: no"},{"role":"tool","callId":"c1","content":"ok"},{"role":"user","content":"first"}]}"#
        );
        let back: TraceRecord = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(back, with[5]);
        assert_eq!(
            TraceRecord::from_json_tag_first(&line),
            None,
            "the general path reads it"
        );
    }

    #[test]
    fn unknown_fields_are_rejected() {
        let line = r#"{"kind":"stage","node":"pre","call":"c1","outcom":"deny"}"#;
        assert!(serde_json::from_str::<TraceRecord>(line).is_err());
    }
}
