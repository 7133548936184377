//! Session events: the durable log of a run, in the shapes of the reference semantics (§3).
//!
//! Three nodes of the stage graph are session events (`tool/call`, `tool/result`, the injected
//! contexts) and one is a family of them (tool-owned events); [`EventBody::node`] says which.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::graph::NodeId;
use crate::identity::CallId;
use crate::result::{ContentBlock, ErrorInfo};

/// The envelope every session event shares: `{seq, time, type, data, surfaceOp?, sourceEventSeqs?}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionEvent {
    /// Position in the session log, from 1.
    pub seq: u64,
    /// Milliseconds since the session started.
    pub time: u64,
    #[serde(flatten)]
    pub body: EventBody,
    /// Only `user/message` and `tool/result` carry a surface operation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub surface_op: Option<SurfaceOp>,
    /// The events this one answers (a `tool/result` names its `tool/call`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_event_seqs: Option<Vec<u64>>,
}

/// How a model-visible event changes the surface the model sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SurfaceOp {
    Append,
}

/// The type and data of a session event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", content = "data")]
pub enum EventBody {
    /// The model's call, logged before any other stage of it runs. Log-only.
    #[serde(rename = "tool/call")]
    ToolCall(ToolCallData),
    /// The single model-facing outcome of a call.
    #[serde(rename = "tool/result")]
    ToolResult(ToolResultData),
    /// A model-visible user message; rev2 injects additional contexts as these.
    #[serde(rename = "user/message")]
    UserMessage(UserMessage),
    /// rev1's buffered additional context.
    #[serde(rename = "context/message")]
    ContextMessage(ContextMessage),
    /// The approval prompt was asked.
    #[serde(rename = "approval/asked")]
    ApprovalAsked(ApprovalAsked),
    /// The approval prompt was answered.
    #[serde(rename = "approval/decided")]
    ApprovalDecided(ApprovalDecided),
    /// A whole-list snapshot of the todo list (tool-owned).
    #[serde(rename = "todo/write")]
    TodoWrite(TodoWrite),
    /// A file's version as the filesystem tools observed it (tool-owned).
    #[serde(rename = "fs/observed")]
    FsObserved(FsObserved),
    /// A hook handler was invoked (tool-owned).
    #[serde(rename = "hook/invoked")]
    HookInvoked(HookInvoked),
    /// A hook handler finished (tool-owned).
    #[serde(rename = "hook/result")]
    HookResult(HookResult),
    /// A Code Mode sub-call actually started.
    #[serde(rename = "tool/code-dispatch-start")]
    CodeDispatchStart(CodeDispatchStart),
    /// A Code Mode sub-call was committed (tool-owned by `run_code`).
    #[serde(rename = "tool/code-dispatch")]
    CodeDispatch(CodeDispatch),
}

impl EventBody {
    /// The call the event's own data names: a `tool/call`'s or `tool/result`'s id, the call an
    /// approval is asked for, a dispatch event's sub-call, the call whose result a message
    /// came from. A trace may attribute an event to a call beside this (`EventRecord::call`).
    pub fn named_call(&self) -> Option<&CallId> {
        fn from_a_tool(source: &MessageSource) -> Option<&CallId> {
            match source {
                MessageSource::Tool { call_id } => Some(call_id),
                _ => None,
            }
        }
        match self {
            EventBody::ToolCall(data) => Some(&data.call_id),
            EventBody::ToolResult(data) => data.call_id(),
            EventBody::ApprovalAsked(data) => data.call_id.as_ref(),
            EventBody::CodeDispatchStart(data) => Some(&data.sub_call_id),
            EventBody::CodeDispatch(data) => Some(&data.sub_call_id),
            EventBody::UserMessage(m) => from_a_tool(&m.source),
            EventBody::ContextMessage(m) => from_a_tool(&m.source),
            _ => None,
        }
    }

    /// Every event type, as traces spell it.
    pub const TYPES: [&'static str; 12] = [
        "tool/call",
        "tool/result",
        "user/message",
        "context/message",
        "approval/asked",
        "approval/decided",
        "todo/write",
        "fs/observed",
        "hook/invoked",
        "hook/result",
        "tool/code-dispatch-start",
        "tool/code-dispatch",
    ];

    pub fn type_name(&self) -> &'static str {
        match self {
            EventBody::ToolCall(_) => "tool/call",
            EventBody::ToolResult(_) => "tool/result",
            EventBody::UserMessage(_) => "user/message",
            EventBody::ContextMessage(_) => "context/message",
            EventBody::ApprovalAsked(_) => "approval/asked",
            EventBody::ApprovalDecided(_) => "approval/decided",
            EventBody::TodoWrite(_) => "todo/write",
            EventBody::FsObserved(_) => "fs/observed",
            EventBody::HookInvoked(_) => "hook/invoked",
            EventBody::HookResult(_) => "hook/result",
            EventBody::CodeDispatchStart(_) => "tool/code-dispatch-start",
            EventBody::CodeDispatch(_) => "tool/code-dispatch",
        }
    }

    /// The stage-graph node this event is an observation of, when it is one.
    pub fn node(&self) -> Option<NodeId> {
        Self::node_of(self.type_name())
    }

    /// The node events of a type observe in a Code Mode sub-call's walk: the dispatch events are
    /// its start and its commit; every other event observes what it observes for a call.
    pub fn code_mode_node_of(type_name: &str) -> Option<NodeId> {
        match type_name {
            "tool/code-dispatch-start" => Some(NodeId::DispatchStart),
            "tool/code-dispatch" => Some(NodeId::Dispatched),
            other => Self::node_of(other),
        }
    }

    /// The node events of a type observe. Approval audit events happen inside the `approval`
    /// stage and are not nodes of their own.
    pub fn node_of(type_name: &str) -> Option<NodeId> {
        match type_name {
            "tool/call" => Some(NodeId::ToolCall),
            "tool/result" => Some(NodeId::ToolResult),
            "user/message" | "context/message" => Some(NodeId::Context),
            "todo/write"
            | "fs/observed"
            | "hook/invoked"
            | "hook/result"
            | "tool/code-dispatch-start"
            | "tool/code-dispatch" => Some(NodeId::Owned),
            _ => None,
        }
    }
}

/// `tool/call` data: the raw model call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallData {
    pub turn: u64,
    pub step: u64,
    pub call_id: CallId,
    pub name: String,
    /// The raw argument string as the model wrote it.
    pub arguments: String,
}

/// `tool/result` data. rev2 records a `ToolResultMessage`; rev1 recorded the flat fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum ToolResultData {
    Message(ToolResultRecord),
    Flat(FlatToolResult),
}

impl ToolResultData {
    pub fn call_id(&self) -> Option<&CallId> {
        match self {
            ToolResultData::Message(m) => m.message.content.first().map(|b| &b.tool_call_id),
            ToolResultData::Flat(f) => Some(&f.call_id),
        }
    }

    pub fn is_error(&self) -> bool {
        match self {
            ToolResultData::Message(m) => m.message.content.iter().any(|b| b.is_error),
            ToolResultData::Flat(f) => f.is_error,
        }
    }

    pub fn content(&self) -> Vec<ContentBlock> {
        match self {
            ToolResultData::Message(m) => m
                .message
                .content
                .iter()
                .flat_map(|b| b.content.iter().cloned())
                .collect(),
            ToolResultData::Flat(f) => f.content.clone(),
        }
    }

    pub fn error(&self) -> Option<&ErrorInfo> {
        match self {
            ToolResultData::Message(m) => m.error.as_ref(),
            ToolResultData::Flat(f) => f.error.as_ref(),
        }
    }
}

/// rev2 `tool/result` data: `{turn, step, message, error?, meta?}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolResultRecord {
    pub turn: u64,
    pub step: u64,
    pub message: ToolResultMessage,
    /// Present only when the failure carries `{name, code}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorInfo>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Value>,
}

impl ToolResultRecord {
    /// A rev1 result as rev2 writes it, at turn 1 and `step`: one `tool-result` block for its
    /// call in a user message whose id is `result-<call>` (the reference's wording).
    pub fn from_flat(flat: FlatToolResult, step: u64) -> Self {
        ToolResultRecord {
            turn: 1,
            step,
            message: ToolResultMessage {
                id: format!("result-{}", flat.call_id),
                role: Role::User,
                source: MessageSource::Tool {
                    call_id: flat.call_id.clone(),
                },
                content: vec![ToolResultBlock {
                    kind: ToolResultBlockType::ToolResult,
                    tool_call_id: flat.call_id,
                    content: flat.content,
                    is_error: flat.is_error,
                }],
            },
            error: flat.error,
            meta: flat.meta,
        }
    }
}

/// rev1 `tool/result` data: `{callId, content, isError, error?, meta?}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FlatToolResult {
    pub call_id: CallId,
    pub content: Vec<ContentBlock>,
    pub is_error: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorInfo>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Value>,
}

/// The model-facing message of a `tool/result`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolResultMessage {
    pub id: String,
    pub role: Role,
    pub source: MessageSource,
    pub content: Vec<ToolResultBlock>,
}

/// The role of a model-visible message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    User,
}

/// `{type:'tool-result', toolCallId, content, isError}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolResultBlock {
    #[serde(rename = "type")]
    pub kind: ToolResultBlockType,
    pub tool_call_id: CallId,
    pub content: Vec<ContentBlock>,
    pub is_error: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ToolResultBlockType {
    ToolResult,
}

/// Where a model-visible message came from. The harness's sources are open: a plugin adds
/// its own `kind` (`goal`, `skill-catalog`, `subagent-report`...); tep reads `user`, `plugin`
/// and `tool`, and keeps any other whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MessageSource {
    User,
    Plugin {
        plugin: String,
        form: Option<String>,
    },
    Tool {
        call_id: CallId,
    },
    /// A source of another `kind`: all its members, `kind` among them.
    Other(serde_json::Map<String, Value>),
}

/// The sources tep reads, as the log writes them.
#[derive(Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "lowercase")]
enum KnownSource {
    User,
    Plugin {
        plugin: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        form: Option<String>,
    },
    Tool {
        #[serde(rename = "callId")]
        call_id: CallId,
    },
}

const KNOWN_SOURCES: [&str; 3] = ["user", "plugin", "tool"];

impl Serialize for MessageSource {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let known = match self {
            MessageSource::User => KnownSource::User,
            MessageSource::Plugin { plugin, form } => KnownSource::Plugin {
                plugin: plugin.clone(),
                form: form.clone(),
            },
            MessageSource::Tool { call_id } => KnownSource::Tool {
                call_id: call_id.clone(),
            },
            MessageSource::Other(members) => return members.serialize(serializer),
        };
        known.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for MessageSource {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let crate::strict_json::StrictValue(value) = Deserialize::deserialize(deserializer)?;
        let Value::Object(members) = value else {
            return Err(D::Error::custom(
                "a message source must be an object with a string `kind`",
            ));
        };
        match members.get("kind") {
            Some(Value::String(kind)) if !KNOWN_SOURCES.contains(&kind.as_str()) => {
                Ok(MessageSource::Other(members))
            }
            _ => Ok(
                match serde_json::from_value(Value::Object(members)).map_err(D::Error::custom)? {
                    KnownSource::User => MessageSource::User,
                    KnownSource::Plugin { plugin, form } => MessageSource::Plugin { plugin, form },
                    KnownSource::Tool { call_id } => MessageSource::Tool { call_id },
                },
            ),
        }
    }
}

impl JsonSchema for MessageSource {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "MessageSource".into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let mut schema = KnownSource::json_schema(generator);
        schema.insert(
            "description".into(),
            "Where a model-visible message came from: `user`, `plugin`, `tool`, or a plugin's own `kind`, kept whole.".into(),
        );
        if let Some(Value::Array(branches)) = schema.get_mut("oneOf") {
            branches.push(serde_json::json!({
                "description": "A source of a plugin's own kind (`goal`, `skill-catalog`, `subagent-report`...): any members, all kept.",
                "type": "object",
                "properties": {
                    "kind": {
                        "type": "string",
                        "not": { "enum": KNOWN_SOURCES },
                        "description": "Any kind but `user`, `plugin` and `tool`."
                    }
                },
                "required": ["kind"]
            }));
        }
        schema
    }
}

/// `user/message` data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UserMessage {
    pub id: String,
    pub role: Role,
    pub content: Vec<ContentBlock>,
    pub source: MessageSource,
}

/// rev1 `context/message` data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ContextMessage {
    pub content: Vec<ContentBlock>,
    pub source: MessageSource,
}

/// `approval/asked` data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ApprovalAsked {
    pub id: String,
    pub tool_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<CallId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// `approval/decided` data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApprovalDecided {
    pub id: String,
    /// `allowed-once`, `rejected`, `cancelled` or `unavailable`.
    pub outcome: crate::graph::Outcome,
}

/// `todo/write` data: the whole list; the last one wins.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TodoWrite {
    pub todos: Vec<Todo>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Todo {
    pub content: String,
    pub status: TodoStatus,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TodoStatus {
    Pending,
    InProgress,
    Completed,
}

/// `fs/observed` data. The doc lists it among session events; the original implementation emits
/// it as an in-process notification instead (docs/divergences.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FsObserved {
    pub target: String,
    pub state: FileState,
    pub actor: String,
}

/// What the filesystem tools saw of a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum FileState {
    Present { version: u64 },
    Absent,
}

/// `hook/invoked` data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HookInvoked {
    pub turn: u64,
    pub point: String,
    /// `claude-code` or `codex`.
    pub dialect: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matcher: Option<String>,
    pub handler_id: String,
}

/// `hook/result` data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HookResult {
    pub turn: u64,
    pub point: String,
    pub handler_id: String,
    pub decision: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stderr_summary: Option<String>,
    pub duration_ms: DurationMs,
}

/// A duration in milliseconds as a log writes it: any non-negative JSON number. deepseek-harness
/// writes `hook/result.durationMs` as a `performance.now()` difference, a float such as
/// `89.61006599999928`; a whole number is written back as an integer.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Default)]
pub struct DurationMs(f64);

impl DurationMs {
    /// `None` unless `ms` is finite and not negative.
    pub fn new(ms: f64) -> Option<Self> {
        (ms.is_finite() && ms >= 0.0).then_some(DurationMs(ms))
    }

    pub fn as_f64(self) -> f64 {
        self.0
    }
}

impl From<u32> for DurationMs {
    fn from(ms: u32) -> Self {
        DurationMs(f64::from(ms))
    }
}

/// The largest integer an `f64` holds exactly (2^53).
const EXACT_INTEGER_LIMIT: f64 = 9_007_199_254_740_992.0;

impl Serialize for DurationMs {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if self.0.fract() == 0.0 && self.0 <= EXACT_INTEGER_LIMIT {
            // Exact: a whole, non-negative value below 2^53.
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            serializer.serialize_u64(self.0 as u64)
        } else {
            serializer.serialize_f64(self.0)
        }
    }
}

impl<'de> Deserialize<'de> for DurationMs {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let ms = f64::deserialize(deserializer)?;
        DurationMs::new(ms).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "a duration must be a non-negative number of milliseconds, got {ms}"
            ))
        })
    }
}

impl JsonSchema for DurationMs {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "DurationMs".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "Milliseconds: any non-negative number (a whole one is written as an integer).",
            "type": "number",
            "minimum": 0
        })
    }
}

/// `tool/code-dispatch-start` data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CodeDispatchStart {
    pub root_call_id: CallId,
    pub parent_call_id: CallId,
    pub sub_call_id: CallId,
    pub name: String,
    pub arguments: Value,
}

/// `tool/code-dispatch` data. rev1 recorded a `resultSummary` (at most 200 characters) and no
/// `rootCallId`; rev2 records the full content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CodeDispatch {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root_call_id: Option<CallId>,
    pub parent_call_id: CallId,
    pub sub_call_id: CallId,
    pub name: String,
    pub arguments: Value,
    pub is_error: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<Vec<ContentBlock>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_summary: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelope_serializes_in_the_documented_shape() {
        let event = SessionEvent {
            seq: 1,
            time: 0,
            body: EventBody::ToolCall(ToolCallData {
                turn: 1,
                step: 1,
                call_id: "c1".into(),
                name: "read".into(),
                arguments: "{}".into(),
            }),
            surface_op: None,
            source_event_seqs: None,
        };
        let json = serde_json::to_string(&event).unwrap_or_default();
        assert_eq!(
            json,
            r#"{"seq":1,"time":0,"type":"tool/call","data":{"turn":1,"step":1,"callId":"c1","name":"read","arguments":"{}"}}"#
        );
        let back: SessionEvent = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(back, event);
    }

    #[test]
    fn a_hook_duration_is_any_non_negative_number() {
        let read = |ms: &str| {
            serde_json::from_str::<HookResult>(&format!(
                r#"{{"turn":1,"point":"PreToolUse","handlerId":"h","decision":"pass","durationMs":{ms}}}"#
            ))
            .map(|r| r.duration_ms.as_f64())
        };
        assert_eq!(read("89.61006599999928").ok(), Some(89.61006599999928));
        assert_eq!(read("0").ok(), Some(0.0));
        assert_eq!(read("1e3").ok(), Some(1000.0));
        let negative = read("-1").err().map(|e| e.to_string()).unwrap_or_default();
        assert!(negative.contains("non-negative"), "{negative}");
        assert!(read("\"5\"").is_err());
        // Written back as read: whole numbers as integers, others as they were.
        let write = |ms: f64| {
            DurationMs::new(ms)
                .and_then(|d| serde_json::to_string(&d).ok())
                .unwrap_or_default()
        };
        assert_eq!(write(0.0), "0");
        assert_eq!(write(12.0), "12");
        assert_eq!(write(89.61006599999928), "89.61006599999928");
        assert_eq!(DurationMs::new(f64::NAN), None);
    }

    #[test]
    fn type_names_match_serde() {
        let body = EventBody::TodoWrite(TodoWrite { todos: vec![] });
        let json = serde_json::to_value(&body).unwrap_or_default();
        assert_eq!(json["type"], body.type_name());
        assert!(EventBody::TYPES.contains(&body.type_name()));
    }

    /// `user`, `plugin` and `tool` sources read as before (their other members ignored); a
    /// source of any other kind is kept whole and written back with the same members; what has
    /// no string `kind` is refused.
    #[test]
    fn a_source_of_a_plugins_own_kind_is_kept_whole() {
        let read =
            |text: &str| serde_json::from_str::<MessageSource>(text).map_err(|e| e.to_string());
        assert_eq!(
            read(r#"{"kind":"user","rpcId":"r1"}"#),
            Ok(MessageSource::User)
        );
        assert_eq!(
            read(r#"{"kind":"tool","callId":"c1"}"#),
            Ok(MessageSource::Tool {
                call_id: CallId::new("c1")
            })
        );
        assert_eq!(
            read(r#"{"kind":"plugin","plugin":"hooks","form":"notice"}"#),
            Ok(MessageSource::Plugin {
                plugin: "hooks".into(),
                form: Some("notice".into())
            })
        );
        let goal = r#"{"kind":"goal","goalId":"g1","nested":{"a":[1]}}"#;
        let source = read(goal).unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(&source, MessageSource::Other(m) if m["goalId"] == "g1"));
        assert_eq!(
            serde_json::to_value(&source).ok(),
            serde_json::from_str::<Value>(goal).ok()
        );
        for known in [
            MessageSource::User,
            MessageSource::Tool {
                call_id: CallId::new("c1"),
            },
        ] {
            let again = serde_json::to_string(&known).map(|t| read(&t));
            assert_eq!(again.ok(), Some(Ok(known)));
        }
        for (written, why) in [
            (r#"{"kind":"tool"}"#, "missing field `callId`"),
            (r#"{"callId":"c1"}"#, "missing field `kind`"),
            (r#"{"kind":"goal","a":{"b":1,"b":2}}"#, "duplicate key `b`"),
            (r#""user""#, "must be an object"),
        ] {
            let got = read(written);
            assert!(
                got.as_ref().is_err_and(|e| e.contains(why)),
                "{written}: {got:?}"
            );
        }
    }
}
