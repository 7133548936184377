//! The identity of a call: what no stage may change.
//!
//! The spec's guards box says "identity protected". Here that is a property of the type: an
//! [`Execution`] is created by the registry, shared behind an `Arc`, and offers no way to change
//! its token, call id, tool name or arguments. Every stage receives `&Execution`.

use std::fmt;
use std::sync::Arc;

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

/// An opaque token minted once per execution. It cannot be built outside this crate, so a stage
/// cannot forge another call's token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Token(u64);

impl Token {
    pub(crate) fn mint(n: u64) -> Self {
        Token(n)
    }
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "tok-{}", self.0)
    }
}

#[derive(Debug)]
struct ExecutionInner {
    token: Token,
    call_id: CallId,
    root_call_id: CallId,
    name: String,
    arguments: Value,
    parent: Option<Token>,
}

/// One execution of one call: the frozen identity every stage shares.
#[derive(Debug, Clone)]
pub struct Execution(Arc<ExecutionInner>);

impl Execution {
    pub(crate) fn new(
        token: Token,
        call_id: CallId,
        root_call_id: CallId,
        name: String,
        arguments: Value,
        parent: Option<Token>,
    ) -> Self {
        Execution(Arc::new(ExecutionInner {
            token,
            call_id,
            root_call_id,
            name,
            arguments,
            parent,
        }))
    }

    pub fn token(&self) -> Token {
        self.0.token
    }

    pub fn call_id(&self) -> &CallId {
        &self.0.call_id
    }

    /// The model-facing call this execution belongs to (itself, or a Code Mode parent).
    pub fn root_call_id(&self) -> &CallId {
        &self.0.root_call_id
    }

    pub fn name(&self) -> &str {
        &self.0.name
    }

    /// The arguments, parsed once from the model's string and never changed afterwards.
    pub fn arguments(&self) -> &Value {
        &self.0.arguments
    }

    /// The token of the `run_code` execution a Code Mode sub-call was issued from.
    pub fn parent(&self) -> Option<Token> {
        self.0.parent
    }

    /// Whether two handles share one execution (not merely equal fields).
    pub fn same_as(&self, other: &Execution) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// The identity as a trace records what a stage saw.
    pub fn identity(&self) -> Identity {
        Identity {
            token: self.0.token.to_string(),
            call_id: self.0.call_id.clone(),
            name: self.0.name.clone(),
            arguments: self.0.arguments.clone(),
            parent_token: self.0.parent.map(|t| t.to_string()),
        }
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
    fn same_as_is_one_execution_not_equal_fields() {
        let make = || {
            Execution::new(
                Token(1),
                CallId::from("c1"),
                CallId::from("c1"),
                "read".into(),
                serde_json::json!({}),
                None,
            )
        };
        let one = make();
        assert!(one.same_as(&one.clone()));
        assert!(!one.same_as(&make()), "equal fields, another execution");
    }

    #[test]
    fn sub_call_ids_count_from_one() {
        assert_eq!(CallId::from("c1").code_sub_call(1).as_str(), "c1:code:1");
    }
}
