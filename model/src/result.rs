//! Results, failures and the normalization of failures into `isError` results.

use std::any::Any;
use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A block of model-facing content: text, or a block of another type that tep keeps but does
/// not read (an `image` a tool read, a plugin's own block: a harness's vocabulary of blocks
/// grows, and a log that uses a new one stays readable).
///
/// A text block is exactly `{"type": "text", "text": ...}`. Any other block is an object with
/// a string `type`, kept whole: every member, as read (in key order once written again).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ContentBlock {
    Text {
        text: String,
    },
    /// A block whose `type` is not `text`: all its members, `type` among them.
    Other(Map<String, Value>),
}

impl ContentBlock {
    pub fn text(text: impl Into<String>) -> Self {
        ContentBlock::Text { text: text.into() }
    }

    /// The block's text; a block of another type has none (`""`).
    pub fn as_text(&self) -> &str {
        match self {
            ContentBlock::Text { text } => text,
            ContentBlock::Other(_) => "",
        }
    }

    /// The block's `type`.
    pub fn kind(&self) -> &str {
        match self {
            ContentBlock::Text { .. } => "text",
            ContentBlock::Other(members) => members
                .get("type")
                .and_then(Value::as_str)
                .unwrap_or_default(),
        }
    }

    /// The block of `members`, or why it is none: no string `type`; or a text block with a
    /// member other than `text`, or without it.
    fn from_members(mut members: Map<String, Value>) -> Result<Self, String> {
        match members.get("type") {
            None => Err("missing field `type`".to_owned()),
            Some(Value::String(kind)) if kind == "text" => {
                if let Some(other) = members.keys().find(|k| *k != "type" && *k != "text") {
                    return Err(format!(
                        "unknown field `{other}`, expected `type` or `text`"
                    ));
                }
                match members.remove("text") {
                    Some(Value::String(text)) => Ok(ContentBlock::Text { text }),
                    Some(other) => Err(format!(
                        "invalid type: {}, expected a string",
                        json_kind(&other)
                    )),
                    None => Err("missing field `text`".to_owned()),
                }
            }
            Some(Value::String(_)) => Ok(ContentBlock::Other(members)),
            Some(other) => Err(format!(
                "invalid type for field `type`: {}, expected a string",
                json_kind(other)
            )),
        }
    }
}

/// The kind of a JSON value, as serde's errors name it.
fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "sequence",
        Value::Object(_) => "map",
    }
}

impl Serialize for ContentBlock {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        match self {
            ContentBlock::Text { text } => {
                let mut map = serializer.serialize_map(Some(2))?;
                map.serialize_entry("type", "text")?;
                map.serialize_entry("text", text)?;
                map.end()
            }
            ContentBlock::Other(members) => members.serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for ContentBlock {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(BlockVisitor)
    }
}

struct BlockVisitor;

impl<'de> serde::de::Visitor<'de> for BlockVisitor {
    type Value = ContentBlock;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a content block: an object with a string `type`")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(
        self,
        mut access: A,
    ) -> Result<ContentBlock, A::Error> {
        let mut members = Map::new();
        while let Some(key) = access.next_key::<String>()? {
            if members.contains_key(&key) {
                return Err(serde::de::Error::custom(format_args!(
                    "duplicate field `{key}`"
                )));
            }
            // Strict within: a key named twice in a block's own objects is refused too.
            let crate::strict_json::StrictValue(value) = access.next_value()?;
            members.insert(key, value);
        }
        ContentBlock::from_members(members).map_err(serde::de::Error::custom)
    }
}

impl JsonSchema for ContentBlock {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ContentBlock".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "A block of model-facing content: text, or a block of another type (an image, a plugin's own), kept whole.",
            "oneOf": [
                {
                    "description": "A text block: exactly these two members.",
                    "type": "object",
                    "properties": {
                        "type": { "type": "string", "const": "text" },
                        "text": { "type": "string", "description": "The text the model sees." }
                    },
                    "required": ["type", "text"],
                    "additionalProperties": false
                },
                {
                    "description": "A block of another type (`image`, a plugin's own): any members, all kept; tep reads no text from it.",
                    "type": "object",
                    "properties": {
                        "type": {
                            "type": "string",
                            "not": { "const": "text" },
                            "description": "Any type but `text`."
                        }
                    },
                    "required": ["type"]
                }
            ]
        })
    }
}

/// The text of a content list: its text blocks joined by newlines (blocks of other types have
/// no text).
pub fn content_text(content: &[ContentBlock]) -> String {
    content
        .iter()
        .filter(|block| matches!(block, ContentBlock::Text { .. }))
        .map(ContentBlock::as_text)
        .collect::<Vec<_>>()
        .join("\n")
}

/// The error codes of the reference semantics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    UnknownTool,
    InvalidToolOutput,
    InvalidArgs,
    Aborted,
    AbortedBeforeDispatch,
    ToolTimeout,
    CodeRunFailed,
}

impl ErrorCode {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::UnknownTool => "UNKNOWN_TOOL",
            ErrorCode::InvalidToolOutput => "INVALID_TOOL_OUTPUT",
            ErrorCode::InvalidArgs => "INVALID_ARGS",
            ErrorCode::Aborted => "ABORTED",
            ErrorCode::AbortedBeforeDispatch => "ABORTED_BEFORE_DISPATCH",
            ErrorCode::ToolTimeout => "TOOL_TIMEOUT",
            ErrorCode::CodeRunFailed => "CODE_RUN_FAILED",
        }
    }

    /// The error class name that goes with the code in `error.info.name`.
    pub fn class_name(self) -> &'static str {
        match self {
            ErrorCode::UnknownTool => "UnknownToolError",
            ErrorCode::InvalidToolOutput => "InvalidToolOutputError",
            ErrorCode::InvalidArgs => "InvalidArgsError",
            ErrorCode::Aborted | ErrorCode::AbortedBeforeDispatch => "AbortError",
            ErrorCode::ToolTimeout => "ToolTimeoutError",
            ErrorCode::CodeRunFailed => "CodeRunFailedError",
        }
    }
}

/// The structured part of a harness error: `{name, code}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ErrorInfo {
    pub name: String,
    pub code: String,
}

impl From<ErrorCode> for ErrorInfo {
    fn from(code: ErrorCode) -> Self {
        ErrorInfo {
            name: code.class_name().to_owned(),
            code: code.as_str().to_owned(),
        }
    }
}

/// The error of a failed result: `{message, info?}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ResultError {
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub info: Option<ErrorInfo>,
}

/// Where an additional context came from. Within one call the batch injects them in this order.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum ContextOrigin {
    /// Deferred by the tool body (`exec.deferContext`).
    Tool,
    /// Added by a `tools/execute` wrapper.
    Wrapper,
    /// Added by a `tools/post-execute` decision.
    Post,
}

impl ContextOrigin {
    /// The origin as traces spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            ContextOrigin::Tool => "tool",
            ContextOrigin::Wrapper => "wrapper",
            ContextOrigin::Post => "post",
        }
    }
}

/// Model-visible text a stage asks to inject after the batch's results.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AdditionalContext {
    pub origin: ContextOrigin,
    pub text: String,
}

/// The execution-local result of a call.
///
/// `value` lives only inside the execution: it is never serialized (reference semantics §3).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolResult {
    pub is_error: bool,
    pub content: Vec<ContentBlock>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ResultError>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Value>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub additional_contexts: Vec<AdditionalContext>,
    #[serde(skip)]
    #[schemars(skip)]
    pub value: Option<Value>,
}

impl ToolResult {
    /// A success carrying `value`, rendered to `content`.
    pub fn success(value: Value, content: Vec<ContentBlock>) -> Self {
        ToolResult {
            is_error: false,
            content,
            error: None,
            meta: None,
            additional_contexts: Vec::new(),
            value: Some(value),
        }
    }

    /// A failed result: content `Error: <message>`, `error {message, info?}`.
    pub fn failure(message: impl Into<String>, info: Option<ErrorInfo>) -> Self {
        let message = message.into();
        ToolResult {
            is_error: true,
            content: vec![ContentBlock::text(format!("Error: {message}"))],
            error: Some(ResultError { message, info }),
            meta: None,
            additional_contexts: Vec::new(),
            value: None,
        }
    }

    /// The result of a denial (pre-execute `deny`, approval refused, a guard's reason).
    pub fn denial(reason: &str) -> Self {
        Self::failure(reason, None)
    }

    /// Outer normalization of a throw.
    pub fn from_failure(failure: &Failure) -> Self {
        Self::failure(failure.message.clone(), failure.info.clone())
    }

    /// The error code, if the failure carries one.
    pub fn error_code(&self) -> Option<&str> {
        self.error
            .as_ref()
            .and_then(|e| e.info.as_ref())
            .map(|i| i.code.as_str())
    }

    pub fn text(&self) -> String {
        content_text(&self.content)
    }
}

/// A throw: an error returned by an extension point, a tool body or a callback, or a panic
/// caught at a stage boundary. The pipeline never lets one escape; it becomes an `isError` result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub message: String,
    pub info: Option<ErrorInfo>,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.info {
            Some(info) => write!(f, "{} ({}): {}", info.name, info.code, self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for Failure {}

impl Failure {
    pub fn new(message: impl Into<String>) -> Self {
        Failure {
            message: message.into(),
            info: None,
        }
    }

    pub fn coded(code: ErrorCode, message: impl Into<String>) -> Self {
        Failure {
            message: message.into(),
            info: Some(code.into()),
        }
    }

    /// A caught panic, with its message when the payload is a string (the reference semantics'
    /// rule for hostile thrown values: message, else a printable form, else a placeholder).
    pub fn from_panic(payload: &(dyn Any + Send)) -> Self {
        let message = if let Some(s) = payload.downcast_ref::<&str>() {
            (*s).to_owned()
        } else if let Some(s) = payload.downcast_ref::<String>() {
            s.clone()
        } else {
            "<unprintable thrown value>".to_owned()
        };
        Failure::new(format!("panicked: {message}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_reads_with_its_error_name_and_code() {
        assert_eq!(Failure::new("boom").to_string(), "boom");
        let coded = Failure::coded(ErrorCode::ToolTimeout, "too slow");
        let info = coded
            .info
            .clone()
            .unwrap_or_else(|| panic!("a coded failure has info"));
        assert_eq!(
            coded.to_string(),
            format!("{} ({}): too slow", info.name, info.code)
        );
        assert!(coded.to_string().contains("TOOL_TIMEOUT"));
    }

    #[test]
    fn context_origins_are_spelled_as_traces_spell_them() {
        for origin in [
            ContextOrigin::Tool,
            ContextOrigin::Wrapper,
            ContextOrigin::Post,
        ] {
            assert_eq!(
                serde_json::to_value(origin).ok(),
                Some(serde_json::Value::String(origin.as_str().to_owned()))
            );
        }
    }

    #[test]
    fn value_is_never_serialized() {
        let r = ToolResult::success(
            serde_json::json!({"secret": 1}),
            vec![ContentBlock::text("ok")],
        );
        let json = serde_json::to_string(&r).unwrap_or_default();
        assert_eq!(
            json,
            r#"{"isError":false,"content":[{"type":"text","text":"ok"}]}"#
        );
    }

    #[test]
    fn failures_normalize_to_error_results() {
        let r = ToolResult::from_failure(&Failure::coded(ErrorCode::ToolTimeout, "late"));
        assert!(r.is_error);
        assert_eq!(r.text(), "Error: late");
        assert_eq!(r.error_code(), Some("TOOL_TIMEOUT"));
    }

    #[test]
    fn panic_payloads_become_messages() {
        let f = Failure::from_panic(&"boom");
        assert_eq!(f.message, "panicked: boom");
        let f = Failure::from_panic(&42_u8);
        assert_eq!(f.message, "panicked: <unprintable thrown value>");
    }

    /// A text block reads and writes as `{"type":"text","text":...}`; a block of any other
    /// type is kept whole and written back with the same members; what is neither is refused, in
    /// words that name the field.
    #[test]
    fn content_blocks_of_any_type_are_kept_and_a_text_block_stays_exact() {
        let read =
            |text: &str| serde_json::from_str::<ContentBlock>(text).map_err(|e| e.to_string());
        let text = r#"{"type":"text","text":"hi"}"#;
        assert_eq!(read(text), Ok(ContentBlock::text("hi")));
        assert_eq!(
            read(r#"{"text":"hi","type":"text"}"#),
            Ok(ContentBlock::text("hi"))
        );
        let image = r#"{"type":"image","attachment":{"id":"a1","mediaType":"image/png"}}"#;
        let block = read(image).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((block.kind(), block.as_text()), ("image", ""));
        for written in [text, image, r#"{"type":"reasoning","text":"why"}"#] {
            let block = read(written).unwrap_or_else(|e| panic!("{e}"));
            let again = serde_json::to_value(&block).ok();
            assert_eq!(
                again,
                serde_json::from_str::<Value>(written).ok(),
                "{written}"
            );
        }
        assert_eq!(
            content_text(&[
                ContentBlock::text("a"),
                read(image).unwrap_or_else(|e| panic!("{e}")),
                ContentBlock::text("b")
            ]),
            "a\nb"
        );
        for (written, why) in [
            (
                r#"{"type":"text","text":"hi","extra":1}"#,
                "unknown field `extra`",
            ),
            (r#"{"type":"text"}"#, "missing field `text`"),
            (
                r#"{"type":"text","text":3}"#,
                "invalid type: number, expected a string",
            ),
            (r#"{"text":"hi"}"#, "missing field `type`"),
            (
                r#"{"type":7,"text":"hi"}"#,
                "invalid type for field `type`: number",
            ),
            (
                r#"{"type":"image","type":"text"}"#,
                "duplicate field `type`",
            ),
            (r#"{"type":"image","a":{"b":1,"b":2}}"#, "duplicate key `b`"),
            (r#""hi""#, "expected a content block"),
        ] {
            let got = read(written);
            assert!(
                got.as_ref().is_err_and(|e| e.contains(why)),
                "{written}: {got:?}"
            );
        }
    }
}
