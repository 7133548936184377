//! The identity of a call: what no stage may change.
//!
//! The spec's guards box says "identity protected". Here that is a property of the type: an
//! [`Execution`] is created by the registry, shared behind an `Arc`, and offers no way to change
//! its token, call id, tool name or arguments. Every stage receives `&Execution`. Its recorded
//! form, `Identity`, and `CallId` are the model's (`tep_model::identity`).

use std::fmt;
use std::sync::Arc;

use serde_json::Value;

use tep_model::identity::*;

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
