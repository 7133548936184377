//! The adapter protocol: newline-delimited JSON over an implementation's stdin and stdout.
//!
//! `docs/adapter-protocol.md` is the normative description; these types are the messages, and
//! `docs/schemas/protocol.schema.json` is generated from them.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tep_model::graph::Revision;
use tep_model::trace::{Capability, ObservationLevel, TraceRecord};

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
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunAnswer {
    pub seq: u64,
    #[serde(flatten)]
    pub outcome: RunOutcome,
}

// Read by hand, not through `#[serde(flatten)]` (which still writes it and gives its schema):
// flattening buffers the whole answer as untyped values before reading it, a second copy of a
// trace that may be 16 MiB.
impl<'de> Deserialize<'de> for RunAnswer {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(RunAnswerVisitor)
    }
}

/// The keys of an answer, and the one outcome it gives.
const ANSWER_FIELDS: &[&str] = &["seq", "trace", "skipped", "errored", "escaped"];

struct RunAnswerVisitor;

/// The bodies of the outcomes that are objects, as [`RunOutcome`]'s variants read them.
#[derive(Deserialize)]
struct SkippedBody {
    reason: String,
}

#[derive(Deserialize)]
struct ErroredBody {
    message: String,
    #[serde(default)]
    context: Option<String>,
}

#[derive(Deserialize)]
struct EscapedBody {
    message: String,
    trace: Records,
}

/// A trace inside an answer, read record by record as `tep check` reads a line: in one typed
/// pass when the record leads with its tag ([`TraceRecord::from_json_tag_first`]), else by
/// the derived reader. The derived reader of an internally tagged enum buffers each record as
/// untyped values first; for a 16 MiB trace that buffer was most of the memory an answer took.
struct Records(Vec<TraceRecord>);

impl<'de> Deserialize<'de> for Records {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_seq(RecordsVisitor)
    }
}

struct RecordsVisitor;

impl<'de> serde::de::Visitor<'de> for RecordsVisitor {
    type Value = Records;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a trace: an array of trace records")
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Records, A::Error> {
        let mut records = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
        while let Some(raw) = seq.next_element::<Box<serde_json::value::RawValue>>()? {
            let text = raw.get();
            let record = match TraceRecord::from_json_tag_first(text) {
                Some(record) => record,
                None => serde_json::from_str(text).map_err(|e| {
                    serde::de::Error::custom(format_args!(
                        "trace record {}: {e}",
                        records.len() + 1
                    ))
                })?,
            };
            records.push(record);
        }
        Ok(Records(records))
    }
}

impl<'de> serde::de::Visitor<'de> for RunAnswerVisitor {
    type Value = RunAnswer;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("an answer: `seq` and one of `trace`, `skipped`, `errored`, `escaped`")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<RunAnswer, A::Error> {
        use serde::de::Error;
        let mut seq = None;
        let mut outcome: Option<(&'static str, RunOutcome)> = None;
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            let name = ANSWER_FIELDS
                .iter()
                .copied()
                .find(|f| *f == key)
                .ok_or_else(|| A::Error::unknown_field(&key, ANSWER_FIELDS))?;
            if name == "seq" {
                if seq.is_some() {
                    return Err(A::Error::duplicate_field("seq"));
                }
                seq = Some(map.next_value()?);
                continue;
            }
            if let Some((first, _)) = outcome {
                return Err(if first == name {
                    A::Error::duplicate_field(name)
                } else {
                    A::Error::custom(format_args!(
                        "an answer gives one outcome, not both `{first}` and `{name}`"
                    ))
                });
            }
            let read = match name {
                "trace" => RunOutcome::Trace(map.next_value::<Records>()?.0),
                "skipped" => {
                    let SkippedBody { reason } = map.next_value()?;
                    RunOutcome::Skipped { reason }
                }
                "errored" => {
                    let ErroredBody { message, context } = map.next_value()?;
                    RunOutcome::Errored { message, context }
                }
                _ => {
                    let EscapedBody { message, trace } = map.next_value()?;
                    RunOutcome::Escaped {
                        message,
                        trace: trace.0,
                    }
                }
            };
            outcome = Some((name, read));
        }
        let seq = seq.ok_or_else(|| A::Error::missing_field("seq"))?;
        let (_, outcome) = outcome.ok_or_else(|| {
            A::Error::custom("an answer gives one of `trace`, `skipped`, `errored`, `escaped`")
        })?;
        Ok(RunAnswer { seq, outcome })
    }
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
    fn an_answer_is_read_whole_and_refused_with_its_fault_named() {
        let read = |text: &str| serde_json::from_str::<RunAnswer>(text).map_err(|e| e.to_string());
        let errored = read(r#"{"errored":{"message":"m","context":"c"},"seq":7}"#);
        assert_eq!(
            errored.map(|a| (a.seq, a.outcome)),
            Ok((
                7,
                RunOutcome::Errored {
                    message: "m".into(),
                    context: Some("c".into())
                }
            ))
        );
        let escaped = read(r#"{"seq":2,"escaped":{"message":"boom","trace":[]}}"#);
        assert_eq!(
            escaped.map(|a| a.outcome),
            Ok(RunOutcome::Escaped {
                message: "boom".into(),
                trace: vec![]
            })
        );
        // Escaped keys are keys like any other.
        assert!(read(r#"{"\u0073eq":1,"trace":[]}"#).is_ok());
        for (text, error) in [
            (r#"{"seq":1}"#, "an answer gives one of `trace`"),
            (r#"{"trace":[]}"#, "missing field `seq`"),
            (r#"{"seq":1,"seq":2,"trace":[]}"#, "duplicate field `seq`"),
            (
                r#"{"seq":1,"trace":[],"trace":[]}"#,
                "duplicate field `trace`",
            ),
            (
                r#"{"seq":1,"trace":[],"skipped":{"reason":"r"}}"#,
                "not both `trace` and `skipped`",
            ),
            (r#"{"seq":1,"trace":[],"extra":0}"#, "unknown field `extra`"),
            (r#"{"seq":1,"skipped":{}}"#, "missing field `reason`"),
            (r#"[1]"#, "expected an answer"),
            (r#"{"seq":1,"trace":{}}"#, "expected a trace"),
            (
                r#"{"seq":1,"trace":[{"kind":"stage","node":"presentCall","call":"c1"},{"kind":"stage"}]}"#,
                "trace record 2: missing field `node`",
            ),
        ] {
            let got = read(text);
            assert!(
                got.as_ref().is_err_and(|e| e.contains(error)),
                "{text}: {got:?}, not {error:?}"
            );
        }
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
