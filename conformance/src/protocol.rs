//! The adapter protocol: newline-delimited JSON over an implementation's stdin and stdout.
//!
//! `docs/adapter-protocol.md` is the normative description; these types are the messages, and
//! `docs/schemas/protocol.schema.json` is generated from them.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tep_reference::graph::Revision;
use tep_reference::trace::{Capability, ObservationLevel, TraceRecord};

use crate::scenario::Scenario;

/// The protocol version this runner speaks: the newest version of the scenario language
/// (`scenario::versions`; a test keeps the two equal).
pub const PROTOCOL_VERSION: u32 = 3;

/// The versions it accepts from an adapter. Version 1 adapters (before `observation` and
/// `escaped`) are checked at level `hooks`. An adapter is sent no scenario construct newer than
/// the version it declares: such a scenario is N/A.
pub const SUPPORTED_PROTOCOLS: [u32; 3] = [1, 2, 3];

/// What the runner sends, one per line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "cmd", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Request {
    /// The handshake. Answered with [`Ready`].
    Start { protocol: u32 },
    /// Run one scenario. Answered with a [`RunAnswer`] carrying the same `seq`.
    Run {
        seq: u64,
        /// The spec revision to run the scenario under.
        spec: Revision,
        scenario: Box<Scenario>,
    },
    /// The run is over: exit.
    Stop,
}

/// The answer to `start`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Ready {
    /// Must be `true`.
    pub ready: bool,
    /// The protocol version the adapter speaks: one the runner supports. No scenario construct
    /// newer than it is sent.
    pub protocol: u32,
    pub implementation: ImplementationInfo,
    /// The optional parts the implementation has. Scenarios needing others are N/A.
    #[serde(default)]
    pub capabilities: Vec<Capability>,
    /// The spec revisions it implements (default: rev2).
    #[serde(default = "default_specs")]
    pub specs: Vec<Revision>,
    /// Which records its traces hold (default: `hooks`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observation: Option<ObservationLevel>,
}

impl Ready {
    /// The observation level its traces are checked at.
    pub fn level(&self) -> ObservationLevel {
        self.observation.unwrap_or(ObservationLevel::Hooks)
    }

    /// The revisions it implements, as `rev1, rev2`, for messages.
    pub fn specs_list(&self) -> String {
        self.specs
            .iter()
            .map(|r| r.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

fn default_specs() -> Vec<Revision> {
    vec![Revision::Rev2]
}

/// Who the implementation is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ImplementationInfo {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub language: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub homepage: Option<String>,
}

/// The answer to `run`: exactly one of `trace`, `skipped`, `errored`, with the request's `seq`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunAnswer {
    pub seq: u64,
    #[serde(flatten)]
    pub outcome: RunOutcome,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum RunOutcome {
    /// The scenario ran: the trace, in order.
    Trace(Vec<TraceRecord>),
    /// The implementation cannot run this scenario (reported as skipped, not failed).
    Skipped { reason: String },
    /// Something went wrong in the adapter (reported as errored).
    Errored {
        message: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        context: Option<String>,
    },
    /// An exception escaped the pipeline (protocol 2): the trace recorded up to the escape, and
    /// what escaped. Judged like a trace, and the escape is a violation (`throw-is-normalized`).
    Escaped {
        message: String,
        trace: Vec<TraceRecord>,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_have_the_documented_shape() {
        let skipped = RunAnswer {
            seq: 3,
            outcome: RunOutcome::Skipped {
                reason: "no approval".into(),
            },
        };
        let json = serde_json::to_string(&skipped).unwrap_or_default();
        assert_eq!(json, r#"{"seq":3,"skipped":{"reason":"no approval"}}"#);
        let back: RunAnswer = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(back, skipped);
        let trace: RunAnswer =
            serde_json::from_str(r#"{"seq":1,"trace":[]}"#).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(trace.outcome, RunOutcome::Trace(vec![]));
        assert!(serde_json::from_str::<RunAnswer>(r#"{"seq":1}"#).is_err());
    }

    #[test]
    fn requests_are_tagged_by_cmd() {
        let json = serde_json::to_string(&Request::Start { protocol: 1 }).unwrap_or_default();
        assert_eq!(json, r#"{"cmd":"start","protocol":1}"#);
        assert_eq!(
            serde_json::to_string(&Request::Stop).unwrap_or_default(),
            r#"{"cmd":"stop"}"#
        );
    }
}
