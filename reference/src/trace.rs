//! Traces: the session events and the stage observations of a run, in the order they happened.
//!
//! A trace is what the conformance checker reads (one [`TraceRecord`] per JSON line). Every stage
//! visit is an observation tagged with its graph node and call id; the nodes that *are* session
//! events (`toolCall`, `toolResult`, `owned`, `context`) are observed through the event itself.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::graph::{NodeId, Outcome, Revision};
use crate::identity::{CallId, Identity};
use crate::result::ToolResult;
use crate::session::{EventBody, SessionEvent, SurfaceOp};

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
    Mark(Mark),
}

impl TraceRecord {
    /// The graph node this record observes, if any.
    pub fn node(&self) -> Option<NodeId> {
        match self {
            TraceRecord::Stage(o) => Some(o.node),
            TraceRecord::Event(e) => e.event.body.node(),
            TraceRecord::Header(_) | TraceRecord::Mark(_) => None,
        }
    }

    /// The call this record belongs to, if any.
    pub fn call(&self) -> Option<&CallId> {
        match self {
            TraceRecord::Stage(o) => o.call.as_ref(),
            TraceRecord::Event(e) => e.call.as_ref(),
            TraceRecord::Mark(m) => Some(&m.call),
            TraceRecord::Header(_) => None,
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
    /// Plus the records made at public extension points: the waterfalls' listeners, approval
    /// when a prompt is mounted, guards, the execute wrappers' dispatch, the body, the
    /// definition's `finalizeContent` when it has one, `tools/result` observers, the UI cards.
    Hooks,
    /// Plus the records only the pipeline itself can make (`denied`, `normalized`,
    /// `allResults`, approval `unavailable` without a prompt): everything the reference emits.
    Full,
}

impl ObservationLevel {
    pub const ALL: [ObservationLevel; 3] = [
        ObservationLevel::Events,
        ObservationLevel::Hooks,
        ObservationLevel::Full,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ObservationLevel::Events => "events",
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
#[error("unknown observation level `{0}` (one of: events, hooks, full)")]
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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<Identity>,
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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<ToolResult>,
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
        self.identity = Some(identity);
        self
    }

    /// Records a result as it persists: without the execution-local `value`.
    pub fn result(mut self, result: &ToolResult) -> Self {
        self.result = Some(ToolResult {
            value: None,
            ..result.clone()
        });
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

#[derive(Debug)]
struct RecorderInner {
    records: Vec<TraceRecord>,
    next_seq: u64,
    started: tokio::time::Instant,
}

/// Records a run: appends session events (assigning `seq` and `time`) and stage observations to
/// one ordered trace. Cheap to clone; clones share the trace.
#[derive(Debug, Clone)]
pub struct Recorder {
    inner: Arc<Mutex<RecorderInner>>,
}

impl Default for Recorder {
    fn default() -> Self {
        Self::new()
    }
}

impl Recorder {
    pub fn new() -> Self {
        Recorder {
            inner: Arc::new(Mutex::new(RecorderInner {
                records: Vec::new(),
                next_seq: 1,
                started: tokio::time::Instant::now(),
            })),
        }
    }

    fn lock(&self) -> MutexGuard<'_, RecorderInner> {
        // A panic while holding the lock cannot leave a half-written record behind: every
        // critical section is a single push.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records a stage visit.
    pub fn observe(&self, observation: Observation) {
        self.lock()
            .records
            .push(TraceRecord::Stage(Box::new(observation)));
    }

    /// Records a scripted part's mark.
    pub fn mark(&self, mark: Mark) {
        self.lock().records.push(TraceRecord::Mark(mark));
    }

    /// Appends a session event and returns its `seq`.
    pub fn append(
        &self,
        call: Option<&CallId>,
        body: EventBody,
        surface_op: Option<SurfaceOp>,
        source_event_seqs: Option<Vec<u64>>,
    ) -> u64 {
        let mut inner = self.lock();
        let seq = inner.next_seq;
        inner.next_seq += 1;
        let time = u64::try_from(inner.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        inner.records.push(TraceRecord::Event(Box::new(EventRecord {
            call: call.cloned(),
            event: SessionEvent {
                seq,
                time,
                body,
                surface_op,
                source_event_seqs,
            },
        })));
        seq
    }

    /// The trace so far.
    pub fn records(&self) -> Vec<TraceRecord> {
        self.lock().records.clone()
    }

    /// The session log so far.
    pub fn session_log(&self) -> Vec<SessionEvent> {
        self.lock()
            .records
            .iter()
            .filter_map(|r| match r {
                TraceRecord::Event(e) => Some(e.event.clone()),
                _ => None,
            })
            .collect()
    }

    /// The trace as JSON Lines.
    pub fn to_jsonl(&self) -> String {
        to_jsonl(&self.records())
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
    /// Any other line is refused, even one [`serde_json::from_str`] accepts (a tag further on,
    /// a repeated field, an unknown envelope field): callers fall back on the general path then.
    /// Whenever this succeeds, the general path reads the same record. It exists for speed: the
    /// derived `Deserialize` of the internally tagged and flattened enums buffers every field
    /// before it knows the variant.
    #[inline]
    pub fn from_json_tag_first(text: &str) -> Result<TraceRecord, serde_json::Error> {
        serde_json::from_str::<tag_first::Record>(text).map(|r| r.0)
    }
}

/// The single-pass reader of [`TraceRecord::from_json_tag_first`]: visitors that dispatch on a
/// leading tag, then hand the rest of the object to the variant's own (derived) `Deserialize`
/// or read it field by field. Every refusal is an error; none needs good wording, since the
/// general path is what reports errors.
mod tag_first {
    use std::fmt;

    use serde::de::value::{BorrowedStrDeserializer, MapAccessDeserializer};
    use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, Visitor};
    use serde::{Deserialize, de::Error as _};

    use super::{EventRecord, Mark, Observation, TraceHeader, TraceRecord};
    use crate::graph::NodeId;
    use crate::identity::CallId;
    use crate::result::{ContentBlock, ToolResult};
    use crate::session::{
        ApprovalAsked, ApprovalDecided, CodeDispatch, CodeDispatchStart, ContextMessage, EventBody,
        FlatToolResult, FsObserved, HookInvoked, HookResult, SessionEvent, SurfaceOp, TodoWrite,
        ToolCallData, ToolResultData, ToolResultRecord, UserMessage,
    };

    /// A closed set of names read from a JSON string (an object key or a tag's value).
    macro_rules! names {
        ($(#[$doc:meta])* $name:ident { $($variant:ident = $text:literal),* $(,)? }) => {
            $(#[$doc])*
            #[derive(Debug, Clone, Copy, PartialEq, Eq)]
            enum $name { $($variant),* }

            impl<'de> Deserialize<'de> for $name {
                fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                    struct Names;
                    impl<'de> Visitor<'de> for Names {
                        type Value = $name;
                        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                            f.write_str(concat!("one of the names of ", stringify!($name)))
                        }
                        fn visit_str<E: de::Error>(self, v: &str) -> Result<$name, E> {
                            match v {
                                $($text => Ok($name::$variant),)*
                                other => Err(E::unknown_field(other, &[$($text),*])),
                            }
                        }
                    }
                    // A string and nothing else (serde_json reads identifiers as strings).
                    d.deserialize_str(Names)
                }
            }
        };
    }

    names!(
        /// The first field of a record.
        RecordTag { Kind = "kind" }
    );
    names!(RecordKind {
        Header = "header",
        Stage = "stage",
        Event = "event",
        Mark = "mark",
    });
    names!(ObservationField {
        Node = "node",
        Call = "call",
        Outcome = "outcome",
        Reason = "reason",
        Identity = "identity",
        Listeners = "listeners",
        Verdicts = "verdicts",
        Intent = "intent",
        Result = "result",
        Calls = "calls",
        Parent = "parent",
    });
    names!(EventRecordField {
        Call = "call",
        Event = "event",
    });
    names!(EventField {
        Seq = "seq",
        Time = "time",
        Type = "type",
        Data = "data",
        SurfaceOp = "surfaceOp",
        SourceEventSeqs = "sourceEventSeqs",
    });
    names!(EventType {
        ToolCall = "tool/call",
        ToolResult = "tool/result",
        UserMessage = "user/message",
        ContextMessage = "context/message",
        ApprovalAsked = "approval/asked",
        ApprovalDecided = "approval/decided",
        TodoWrite = "todo/write",
        FsObserved = "fs/observed",
        HookInvoked = "hook/invoked",
        HookResult = "hook/result",
        CodeDispatchStart = "tool/code-dispatch-start",
        CodeDispatch = "tool/code-dispatch",
    });
    names!(
        /// The first field of `tool/result` data, which tells its two shapes apart (the fields
        /// both shapes have, `error` and `meta`, do not).
        ToolResultLead {
            Turn = "turn",
            Step = "step",
            Message = "message",
            CallId = "callId",
            Content = "content",
            IsError = "isError",
        }
    );

    /// Sets a field once; a repeated field is refused.
    fn once<T, E: de::Error>(slot: &mut Option<T>, value: T, name: &'static str) -> Result<(), E> {
        if slot.is_some() {
            return Err(E::duplicate_field(name));
        }
        *slot = Some(value);
        Ok(())
    }

    pub(super) struct Record(pub TraceRecord);

    impl<'de> Deserialize<'de> for Record {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            d.deserialize_map(RecordVisitor).map(Record)
        }
    }

    struct RecordVisitor;

    impl<'de> Visitor<'de> for RecordVisitor {
        type Value = TraceRecord;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a trace record whose first field is `kind`")
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<TraceRecord, A::Error> {
            map.next_key::<RecordTag>()?
                .ok_or_else(|| A::Error::missing_field("kind"))?;
            Ok(match map.next_value::<RecordKind>()? {
                RecordKind::Header => {
                    TraceRecord::Header(TraceHeader::deserialize(MapAccessDeserializer::new(map))?)
                }
                RecordKind::Stage => TraceRecord::Stage(ObservationVisitor.visit_map(map)?),
                RecordKind::Event => {
                    TraceRecord::Event(Box::new(EventRecordVisitor.visit_map(map)?))
                }
                RecordKind::Mark => {
                    TraceRecord::Mark(Mark::deserialize(MapAccessDeserializer::new(map))?)
                }
            })
        }
    }

    /// A stage name, from a string only (the general path refuses any other spelling).
    struct Node(NodeId);

    impl<'de> Deserialize<'de> for Node {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct NodeName;
            impl<'de> Visitor<'de> for NodeName {
                type Value = NodeId;
                fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                    f.write_str("a stage name")
                }
                fn visit_str<E: de::Error>(self, v: &str) -> Result<NodeId, E> {
                    let node = NodeId::deserialize(BorrowedStrDeserializer::<E>::new(v))?;
                    // The general path also parses the name with `FromStr`.
                    if node.as_str() != v {
                        return Err(E::custom(
                            "a stage name serde and FromStr spell differently",
                        ));
                    }
                    Ok(node)
                }
            }
            d.deserialize_str(NodeName).map(Node)
        }
    }

    /// The rest of a stage record, after its `kind`.
    struct ObservationVisitor;

    impl<'de> Visitor<'de> for ObservationVisitor {
        type Value = Box<Observation>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a stage record")
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Box<Observation>, A::Error> {
            // Filled in place (the record is large: moving it costs more than reading it);
            // `seen` has a bit per field, so a repeated one is refused and `node` required.
            let mut obs = Box::new(Observation::at(NodeId::Model));
            let mut seen = 0u16;
            while let Some(field) = map.next_key::<ObservationField>()? {
                let bit = 1 << field as u16;
                if seen & bit != 0 {
                    return Err(A::Error::custom("a repeated field"));
                }
                seen |= bit;
                match field {
                    ObservationField::Node => obs.node = map.next_value::<Node>()?.0,
                    ObservationField::Call => obs.call = map.next_value()?,
                    ObservationField::Outcome => obs.outcome = map.next_value()?,
                    ObservationField::Reason => obs.reason = map.next_value()?,
                    ObservationField::Identity => obs.identity = map.next_value()?,
                    ObservationField::Listeners => obs.listeners = map.next_value()?,
                    ObservationField::Verdicts => obs.verdicts = map.next_value()?,
                    ObservationField::Intent => obs.intent = map.next_value()?,
                    ObservationField::Result => {
                        obs.result = map.next_value::<Option<FastResult>>()?.map(|r| r.0)
                    }
                    ObservationField::Calls => obs.calls = map.next_value()?,
                    ObservationField::Parent => obs.parent = map.next_value()?,
                }
            }
            if seen & (1 << ObservationField::Node as u16) == 0 {
                return Err(A::Error::missing_field("node"));
            }
            Ok(obs)
        }
    }

    names!(ToolResultField {
        IsError = "isError",
        Content = "content",
        Error = "error",
        Meta = "meta",
        AdditionalContexts = "additionalContexts",
    });
    names!(BlockTag { Type = "type" });
    names!(BlockType { Text = "text" });
    names!(TextField { Text = "text" });

    /// A result read field by field, its content blocks without buffering.
    struct FastResult(ToolResult);

    impl<'de> Deserialize<'de> for FastResult {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct Fields;
            impl<'de> Visitor<'de> for Fields {
                type Value = ToolResult;
                fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                    f.write_str("a tool result")
                }
                fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ToolResult, A::Error> {
                    let mut result = ToolResult {
                        is_error: false,
                        content: Vec::new(),
                        error: None,
                        meta: None,
                        additional_contexts: Vec::new(),
                        value: None,
                    };
                    let mut seen = 0u8;
                    while let Some(field) = map.next_key::<ToolResultField>()? {
                        let bit = 1 << field as u8;
                        if seen & bit != 0 {
                            return Err(A::Error::custom("a repeated field"));
                        }
                        seen |= bit;
                        match field {
                            ToolResultField::IsError => result.is_error = map.next_value()?,
                            ToolResultField::Content => {
                                result.content = map.next_value::<Blocks>()?.0
                            }
                            ToolResultField::Error => result.error = map.next_value()?,
                            ToolResultField::Meta => result.meta = map.next_value()?,
                            ToolResultField::AdditionalContexts => {
                                result.additional_contexts = map.next_value()?
                            }
                        }
                    }
                    let required = (1 << ToolResultField::IsError as u8)
                        | (1 << ToolResultField::Content as u8);
                    if seen & required != required {
                        return Err(A::Error::custom("a missing field"));
                    }
                    Ok(result)
                }
            }
            // Only an object: the derived impl would also take an array of the fields.
            d.deserialize_map(Fields).map(FastResult)
        }
    }

    /// Content blocks, each `{"type": "text", "text": ...}` with its tag first.
    struct Blocks(Vec<ContentBlock>);

    impl<'de> Deserialize<'de> for Blocks {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct Elements;
            impl<'de> Visitor<'de> for Elements {
                type Value = Vec<ContentBlock>;
                fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                    f.write_str("content blocks")
                }
                fn visit_seq<S: de::SeqAccess<'de>>(
                    self,
                    mut seq: S,
                ) -> Result<Vec<ContentBlock>, S::Error> {
                    let mut blocks = Vec::new();
                    while let Some(block) = seq.next_element::<Block>()? {
                        blocks.push(block.0);
                    }
                    Ok(blocks)
                }
            }
            d.deserialize_seq(Elements).map(Blocks)
        }
    }

    struct Block(ContentBlock);

    impl<'de> Deserialize<'de> for Block {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct Fields;
            impl<'de> Visitor<'de> for Fields {
                type Value = ContentBlock;
                fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                    f.write_str("a content block whose first field is `type`")
                }
                fn visit_map<A: MapAccess<'de>>(
                    self,
                    mut map: A,
                ) -> Result<ContentBlock, A::Error> {
                    map.next_key::<BlockTag>()?
                        .ok_or_else(|| A::Error::missing_field("type"))?;
                    let BlockType::Text = map.next_value::<BlockType>()?;
                    map.next_key::<TextField>()?
                        .ok_or_else(|| A::Error::missing_field("text"))?;
                    let text: String = map.next_value()?;
                    if map.next_key::<TextField>()?.is_some() {
                        return Err(A::Error::custom("a repeated field"));
                    }
                    Ok(ContentBlock::Text { text })
                }
            }
            d.deserialize_map(Fields).map(Block)
        }
    }

    /// The rest of an event record, after its `kind`.
    struct EventRecordVisitor;

    impl<'de> Visitor<'de> for EventRecordVisitor {
        type Value = EventRecord;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("an event record")
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<EventRecord, A::Error> {
            let mut call: Option<Option<CallId>> = None;
            let mut event: Option<SessionEvent> = None;
            while let Some(field) = map.next_key::<EventRecordField>()? {
                match field {
                    EventRecordField::Call => once(&mut call, map.next_value()?, "call")?,
                    EventRecordField::Event => {
                        once(&mut event, map.next_value_seed(EventSeed)?, "event")?
                    }
                }
            }
            Ok(EventRecord {
                call: call.flatten(),
                event: event.ok_or_else(|| A::Error::missing_field("event"))?,
            })
        }
    }

    /// A session event whose `type` comes before its `data`.
    struct EventSeed;

    impl<'de> DeserializeSeed<'de> for EventSeed {
        type Value = SessionEvent;

        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<SessionEvent, D::Error> {
            d.deserialize_map(self)
        }
    }

    impl<'de> Visitor<'de> for EventSeed {
        type Value = SessionEvent;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a session event whose `type` comes before its `data`")
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<SessionEvent, A::Error> {
            let mut seq: Option<u64> = None;
            let mut time: Option<u64> = None;
            let mut kind: Option<EventType> = None;
            let mut body: Option<EventBody> = None;
            let mut surface_op: Option<Option<SurfaceOp>> = None;
            let mut sources: Option<Option<Vec<u64>>> = None;
            while let Some(field) = map.next_key::<EventField>()? {
                match field {
                    EventField::Seq => once(&mut seq, map.next_value()?, "seq")?,
                    EventField::Time => once(&mut time, map.next_value()?, "time")?,
                    EventField::Type => once(&mut kind, map.next_value()?, "type")?,
                    EventField::Data => {
                        let kind = kind.ok_or_else(|| A::Error::custom("`data` before `type`"))?;
                        once(&mut body, data(kind, &mut map)?, "data")?;
                    }
                    EventField::SurfaceOp => once(&mut surface_op, map.next_value()?, "surfaceOp")?,
                    EventField::SourceEventSeqs => {
                        once(&mut sources, map.next_value()?, "sourceEventSeqs")?
                    }
                }
            }
            Ok(SessionEvent {
                seq: seq.ok_or_else(|| A::Error::missing_field("seq"))?,
                time: time.ok_or_else(|| A::Error::missing_field("time"))?,
                body: body.ok_or_else(|| A::Error::missing_field("data"))?,
                surface_op: surface_op.flatten(),
                source_event_seqs: sources.flatten(),
            })
        }
    }

    /// An event's `data`, read as its `type` says.
    fn data<'de, A: MapAccess<'de>>(kind: EventType, map: &mut A) -> Result<EventBody, A::Error> {
        Ok(match kind {
            EventType::ToolCall => EventBody::ToolCall(map.next_value::<ToolCallData>()?),
            EventType::ToolResult => EventBody::ToolResult(map.next_value_seed(ToolResultSeed)?),
            EventType::UserMessage => EventBody::UserMessage(map.next_value::<UserMessage>()?),
            EventType::ContextMessage => {
                EventBody::ContextMessage(map.next_value::<ContextMessage>()?)
            }
            EventType::ApprovalAsked => {
                EventBody::ApprovalAsked(map.next_value::<ApprovalAsked>()?)
            }
            EventType::ApprovalDecided => {
                EventBody::ApprovalDecided(map.next_value::<ApprovalDecided>()?)
            }
            EventType::TodoWrite => EventBody::TodoWrite(map.next_value::<TodoWrite>()?),
            EventType::FsObserved => EventBody::FsObserved(map.next_value::<FsObserved>()?),
            EventType::HookInvoked => EventBody::HookInvoked(map.next_value::<HookInvoked>()?),
            EventType::HookResult => EventBody::HookResult(map.next_value::<HookResult>()?),
            EventType::CodeDispatchStart => {
                EventBody::CodeDispatchStart(map.next_value::<CodeDispatchStart>()?)
            }
            EventType::CodeDispatch => EventBody::CodeDispatch(map.next_value::<CodeDispatch>()?),
        })
    }

    /// `tool/result` data: its first field says which shape it is (the derived untagged enum
    /// buffers the whole object and tries each).
    struct ToolResultSeed;

    impl<'de> DeserializeSeed<'de> for ToolResultSeed {
        type Value = ToolResultData;

        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<ToolResultData, D::Error> {
            d.deserialize_map(self)
        }
    }

    impl<'de> Visitor<'de> for ToolResultSeed {
        type Value = ToolResultData;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("tool/result data")
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ToolResultData, A::Error> {
            let lead = map
                .next_key::<ToolResultLead>()?
                .ok_or_else(|| A::Error::custom("empty tool/result data"))?;
            let rest = MapAccessDeserializer::new(Replay {
                first: Some(lead),
                map,
            });
            Ok(match lead {
                ToolResultLead::Turn | ToolResultLead::Step | ToolResultLead::Message => {
                    ToolResultData::Message(ToolResultRecord::deserialize(rest)?)
                }
                ToolResultLead::CallId | ToolResultLead::Content | ToolResultLead::IsError => {
                    ToolResultData::Flat(FlatToolResult::deserialize(rest)?)
                }
            })
        }
    }

    /// A map whose first key was already read: it is handed out again first.
    struct Replay<A> {
        first: Option<ToolResultLead>,
        map: A,
    }

    impl<'de, A: MapAccess<'de>> MapAccess<'de> for Replay<A> {
        type Error = A::Error;

        fn next_key_seed<K: DeserializeSeed<'de>>(
            &mut self,
            seed: K,
        ) -> Result<Option<K::Value>, A::Error> {
            match self.first.take() {
                Some(lead) => {
                    let name = match lead {
                        ToolResultLead::Turn => "turn",
                        ToolResultLead::Step => "step",
                        ToolResultLead::Message => "message",
                        ToolResultLead::CallId => "callId",
                        ToolResultLead::Content => "content",
                        ToolResultLead::IsError => "isError",
                    };
                    seed.deserialize(BorrowedStrDeserializer::new(name))
                        .map(Some)
                }
                None => self.map.next_key_seed(seed),
            }
        }

        fn next_value_seed<V: DeserializeSeed<'de>>(
            &mut self,
            seed: V,
        ) -> Result<V::Value, A::Error> {
            self.map.next_value_seed(seed)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_through_json() {
        let recorder = Recorder::new();
        recorder.observe(
            Observation::at(NodeId::Pre)
                .call(&"c1".into())
                .outcome(Outcome::Deny)
                .reason("no"),
        );
        recorder.append(
            Some(&"c1".into()),
            EventBody::TodoWrite(crate::session::TodoWrite { todos: vec![] }),
            None,
            None,
        );
        let jsonl = recorder.to_jsonl();
        let back: Vec<TraceRecord> = jsonl
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect();
        assert_eq!(back, recorder.records());
        assert!(jsonl.starts_with(
            r#"{"kind":"stage","node":"pre","call":"c1","outcome":"deny","reason":"no"}"#
        ));
    }

    #[test]
    fn unknown_fields_are_rejected() {
        let line = r#"{"kind":"stage","node":"pre","call":"c1","outcom":"deny"}"#;
        assert!(serde_json::from_str::<TraceRecord>(line).is_err());
    }
}
