//! What the registry's stages hand each other and the fault seams: the seams take these
//! values, never the registry itself (tower's rule: a layer sees a service, not the concrete
//! type around it).

use std::sync::Arc;

use tep_model::identity::CallId;
use tep_model::result::{Failure, ToolResult};

/// The committed outcome of one call.
#[derive(Debug, Clone)]
pub struct CallOutcome {
    pub call_id: CallId,
    /// The frozen outcome, the same value `tools/result` announced and `tool/result` recorded.
    pub result: Arc<ToolResult>,
}

/// What a batch produced, in model order.
#[derive(Debug, Clone, Default)]
pub struct BatchReport {
    pub outcomes: Vec<CallOutcome>,
}

/// How a call's prepare stages ended.
pub(in crate::pipeline) enum Prepared {
    Allowed,
    Denied(String),
    Threw(Failure),
}
