//! The identity of a call as a trace records it: its id, and what a stage saw of it.
//!
//! The pipeline's frozen identity (`Execution`) lives in `tep-reference`; this is its recorded
//! form, which the checker compares stage by stage (`identity-unchanged`).

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A call id as the model assigned it.
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(transparent)]
pub struct CallId(String);

impl CallId {
    pub fn new(id: impl Into<String>) -> Self {
        CallId(id.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The id of the `n`-th Code Mode sub-call of this call (`<parent>:code:<n>`, n from 1).
    pub fn code_sub_call(&self, n: usize) -> CallId {
        CallId(format!("{}:code:{}", self.0, n))
    }

    /// The `run_code` call of a sub-call id in the default scheme ([`Self::code_sub_call`]).
    /// Only for a record that names no parent: an implementation may name its sub-calls
    /// otherwise, so no check may depend on it.
    pub fn sub_call_parent(&self) -> Option<CallId> {
        let (parent, n) = self.0.rsplit_once(":code:")?;
        n.parse::<usize>().ok().map(|_| CallId::from(parent))
    }
}

impl fmt::Display for CallId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for CallId {
    fn from(s: &str) -> Self {
        CallId(s.to_owned())
    }
}

/// What a stage saw of a call's identity, as recorded in a trace. Every stage of one call must
/// record the same identity (`identity-unchanged`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Identity {
    /// The execution's opaque token.
    pub token: String,
    pub call_id: CallId,
    /// The tool name.
    pub name: String,
    /// The parsed arguments.
    pub arguments: Value,
    /// For a Code Mode sub-call: the token of the `run_code` execution it was issued from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_token: Option<String>,
}

/// Parses the model's argument string once: an empty string is `{}`, invalid JSON is passed
/// through as the raw string (reference semantics 1).
pub fn parse_arguments(raw: &str) -> Value {
    if raw.trim().is_empty() {
        return Value::Object(Default::default());
    }
    serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_parse_like_the_loop() {
        assert_eq!(parse_arguments(""), serde_json::json!({}));
        assert_eq!(parse_arguments("{\"a\":1}"), serde_json::json!({"a": 1}));
        assert_eq!(parse_arguments("{oops"), Value::String("{oops".into()));
    }

    #[test]
    fn sub_call_ids_count_from_one() {
        assert_eq!(CallId::from("c1").code_sub_call(1).as_str(), "c1:code:1");
        let sub = CallId::from("c1").code_sub_call(12);
        assert_eq!(sub.sub_call_parent(), Some(CallId::from("c1")));
        assert_eq!(CallId::from("c1:code:x").sub_call_parent(), None);
        assert_eq!(CallId::from("c1").sub_call_parent(), None);
    }
}
