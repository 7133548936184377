//! What the checker's core knows of a trace, and every rule reads: the options it checks
//! against, the open batch and its calls ([`state`]), each call's walk along its graph
//! ([`walk`]), and what holds across batches.
//!
//! The core (`crate::checker`) writes these facts; the rules (`crate::rules`) read them. Both
//! depend on this module, and it on neither.

pub(crate) mod state;
pub(crate) mod walk;

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::{Deserialize, Serialize};
use tep_model::graph::{NodeId, Outcome, Revision};
use tep_model::identity::CallId;
use tep_model::result::ContentBlock;
use tep_model::session::{EventBody, ToolResultData};
use tep_model::trace::{Capability, ObservationLevel, TraceHeader};

use crate::observation::CallFacts;

/// The content blocks a `tool/result` records, in order, borrowed (`ToolResultData::content`
/// clones them).
pub(crate) fn recorded_content(data: &ToolResultData) -> impl Iterator<Item = &ContentBlock> {
    let (message, flat) = match data {
        ToolResultData::Message(m) => (Some(&m.message.content), None),
        ToolResultData::Flat(f) => (None, Some(&f.content)),
    };
    message
        .into_iter()
        .flatten()
        .flat_map(|b| b.content.iter())
        .chain(flat.into_iter().flatten())
}

/// Bit `n` stands for the node `NodeId::ALL[n]`.
pub(crate) fn bit(node: NodeId) -> u32 {
    1 << (node as u32)
}

/// What a scenario says that a trace does not: which definitions have `finalizeContent`, and
/// whether an approval prompt is mounted (drive mode knows; replay mode does not). As JSON it is
/// what the corpus's `facts@<scenario>.snap` files hold, beside each scenario's traces.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScenarioFacts {
    /// The tools whose definition has `finalizeContent`; every other call has none.
    pub finalizers: BTreeSet<String>,
    /// Whether an approval prompt is mounted.
    pub prompt: bool,
    /// What the mounted prompt answers each call (`"*"`: every other call); empty with no
    /// prompt.
    pub answers: BTreeMap<String, Outcome>,
    /// The parallel pool's cap, where the scenario states one.
    pub max_parallel: Option<usize>,
    /// The ids of the `tools/pre-execute` listeners, in registration order (every listener
    /// applies to every call).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pre: Vec<String>,
    /// The ids of the `tools/post-execute` listeners, in registration order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub post: Vec<String>,
    /// Per call of the batch (by id), the contexts its body defers before any step that could
    /// end it: a body that runs at all has deferred these.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub deferred: BTreeMap<String, Vec<String>>,
}

/// What to check a trace against. Build it with [`CheckOptions::from_header`] (what `tep check`
/// does) or [`CheckOptions::new`], then the `with_*` methods.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CheckOptions {
    /// The spec revision the trace is held to.
    pub revision: Revision,
    /// The parts the implementation has; `None` means all. Invariants needing an absent part are
    /// not applicable.
    pub capabilities: Option<BTreeSet<Capability>>,
    /// Which records the trace holds.
    pub level: ObservationLevel,
    /// What the scenario says that the trace does not (drive mode only).
    pub facts: Option<ScenarioFacts>,
    /// Whether bodies record `body-settled` marks (protocol 1 adapters did not); at level
    /// `hooks` and above they are then required.
    pub body_marks: bool,
}

/// Whether an invariant is checked on a trace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", content = "why", rename_all = "kebab-case")]
#[non_exhaustive]
pub enum InvariantStatus {
    /// Its rule runs and its breaches are recorded at this level.
    Checked,
    /// Some of its breaches are caught at this level: what it still catches.
    PartlyCheckable(String),
    /// The trace's observation level lacks the records the check reads, or does not record
    /// its breach.
    NotCheckable(String),
    /// Outside the revision, or about a part the implementation does not declare.
    NotApplicable(String),
}

impl CheckOptions {
    /// Every record expected (`full`), every part present, no scenario facts.
    pub fn new(revision: Revision) -> Self {
        CheckOptions {
            revision,
            capabilities: None,
            level: ObservationLevel::Full,
            facts: None,
            body_marks: true,
        }
    }

    /// What `tep check` holds a trace to: what its header says (the revision, the
    /// implementation's capabilities, the observation level), else rev2, every part, and level
    /// `hooks` (what a harness records without the suite's scripts).
    pub fn from_header(header: Option<&TraceHeader>) -> Self {
        CheckOptions {
            revision: header.map_or(Revision::CURRENT, |h| h.spec),
            capabilities: header
                .and_then(|h| h.capabilities.clone())
                .map(|c| c.into_iter().collect()),
            level: header
                .and_then(|h| h.observation)
                .unwrap_or(ObservationLevel::Hooks),
            facts: None,
            body_marks: true,
        }
    }

    /// The same options at another observation level.
    pub fn observed(mut self, level: ObservationLevel) -> Self {
        self.level = level;
        self
    }

    /// The same options for another revision.
    pub fn with_revision(mut self, revision: Revision) -> Self {
        self.revision = revision;
        self
    }

    /// The same options for an implementation with exactly these parts.
    pub fn with_capabilities(mut self, capabilities: impl IntoIterator<Item = Capability>) -> Self {
        self.capabilities = Some(capabilities.into_iter().collect());
        self
    }

    /// The same options with every part present.
    pub fn with_every_capability(mut self) -> Self {
        self.capabilities = None;
        self
    }

    /// The same options knowing what the scenario says (drive mode).
    pub fn with_facts(mut self, facts: ScenarioFacts) -> Self {
        self.facts = Some(facts);
        self
    }

    /// The same options with or without `body-settled` marks expected (protocol 1 adapters
    /// recorded none).
    pub fn with_body_marks(mut self, body_marks: bool) -> Self {
        self.body_marks = body_marks;
        self
    }

    /// Whether the implementation has `capability`.
    pub fn has(&self, capability: Capability) -> bool {
        self.capabilities
            .as_ref()
            .is_none_or(|caps| caps.contains(&capability))
    }

    /// What the scenario's prompt answers `call`, where the scenario mounts one.
    pub fn scripted_answer(&self, call: &CallId) -> Option<Outcome> {
        let facts = self.facts.as_ref().filter(|f| f.prompt)?;
        facts
            .answers
            .get(call.as_str())
            .or_else(|| facts.answers.get("*"))
            .copied()
    }

    /// What the scenario says about a call of `tool`.
    pub fn call_facts(&self, tool: &str) -> CallFacts {
        match &self.facts {
            None => CallFacts::default(),
            Some(f) => CallFacts {
                finalizer: Some(f.finalizers.contains(tool)),
                prompt: Some(f.prompt),
            },
        }
    }
}

/// What holds across batches: the session log's last seq and what the agent observed of files.
#[derive(Debug, Default)]
pub(crate) struct FsSeen {
    /// Per file, the version the agent last observed and the line.
    pub files: HashMap<String, (u64, usize)>,
    pub last_seq: Option<(u64, usize)>,
}

/// The text of an injected context event: a user or context message.
pub(crate) fn context_text(body: &EventBody) -> Option<String> {
    match body {
        EventBody::UserMessage(m) => Some(tep_model::result::content_text(&m.content)),
        EventBody::ContextMessage(m) => Some(tep_model::result::content_text(&m.content)),
        _ => None,
    }
}
