//! The JSON the other commands print, typed: `tep check --format json` ([`CheckJson`]),
//! `tep scenarios list --format json` ([`ScenarioRow`]) and `tep invariants list --format
//! json` ([`InvariantRow`]). Each has a schema (`tep schema check-report`, `scenario-list`,
//! `invariant-list`; `docs/schemas/`), as the run report does.
//!
//! [`to_json_text`] prints them with every object's keys in alphabetical order: the order
//! these commands have always printed (they were built as untyped values, which sort their
//! keys), so a consumer comparing outputs sees no change.

use schemars::JsonSchema;
use serde::Serialize;
use tep_check::CATALOG;
use tep_check::Violation;
use tep_check::invariants::{Invariant, InvariantId, Level};
use tep_model::graph::Revision;
use tep_model::trace::{Capability, ObservationLevel};

use crate::scenario::Scenario;

/// What `tep check --format json` prints.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[serde(rename_all = "camelCase")]
pub struct CheckJson {
    /// The trace checked: its path, or `-` for standard input.
    pub trace: String,
    pub spec: Revision,
    pub observation: ObservationLevel,
    pub records: usize,
    pub batches: usize,
    /// No MUST violation (no violation at all with `--strict`), and the trace holds a batch.
    pub conformant: bool,
    /// tep-check's verdict: `conformant`, `warned`, `violated` or `nothing-checked`.
    pub verdict: String,
    /// The verdict in words, saying how many invariants were checkable when few were
    /// ("13 of 61 invariants checkable, no violation").
    pub summary: String,
    pub violations: Vec<Violation>,
    /// Violations past the first 1000, not listed.
    pub omitted: usize,
    /// The invariants this trace could check.
    pub checked: Vec<InvariantId>,
    pub partly_checkable: Vec<PartlyCheckable>,
    pub not_checkable: Vec<NotCheckable>,
    /// With `--from`: how the session log was read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_log: Option<SessionLogJson>,
}

/// An invariant the trace can check in part.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PartlyCheckable {
    pub invariant: InvariantId,
    /// What the check still catches at this level.
    pub catches: String,
}

/// An invariant the trace cannot check.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NotCheckable {
    pub invariant: InvariantId,
    pub why: String,
}

/// How `tep check --from` read a session log.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[serde(rename_all = "camelCase")]
pub struct SessionLogJson {
    /// The log's format (`deepseek-harness`).
    pub source: String,
    pub session: String,
    pub lines: usize,
    /// Records read into the trace.
    pub records: usize,
    /// Lines that carry nothing the checker reads.
    pub passed_over: usize,
    /// Event types the reader does not know: how many, and the first line of each.
    pub unknown_types: Vec<UnknownType>,
    /// Members of pipeline events' data that tep does not read (a newer harness adds to its
    /// events), passed over: how many events had each, and the first line.
    pub unknown_fields: Vec<UnknownField>,
    /// Lines of owned and hook events whose call could not be told: the first 20.
    pub unattributed: Vec<usize>,
    /// How many such events there were.
    pub unattributed_count: usize,
    /// The line of the `turn/start` the log ends inside of (no `turn/end`: a log cut short);
    /// what its last batch's end would owe is not judged.
    pub ends_inside_turn: Option<usize>,
    /// Turns a crash interrupted before the log goes on (closed by the harness when it
    /// reloaded the session, or left open when the next turn began): each cut its batch short
    /// there, so what that batch's end would owe is not judged.
    pub interrupted_turns: Vec<InterruptedTurn>,
    /// `tool/result` events that rewrite a result the model already sees (a `surfaceOp` of
    /// `{"op": "replace", ...}`: the harness's compaction pruning a long result), passed over
    /// as no call's outcome: how many, and the first line (null: none).
    pub rewritten_results: Option<RewrittenResults>,
    /// The log's last line when it has no newline and its JSON breaks off (a session killed
    /// while writing it): passed over (null: none).
    pub torn_tail: Option<usize>,
    /// The log was read through a Zstandard decoder (null: it was not compressed); its line
    /// numbers are those of the decompressed text.
    pub zstd: Option<ZstdJson>,
    /// `--safe`: the tools taken as concurrency-safe.
    pub safe: Option<Vec<String>>,
}

/// A session log read through a Zstandard decoder.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[serde(rename_all = "camelCase")]
pub struct ZstdJson {
    /// The frames decoded (the harness appends one per flush).
    pub frames: usize,
    /// The input broke off inside the last frame (a session killed while writing it): the log
    /// ends where it stopped decoding.
    pub broken_off: bool,
}

/// How many `tool/result` events rewrite a result the model already sees, and the first line.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[serde(rename_all = "camelCase")]
pub struct RewrittenResults {
    pub count: usize,
    pub first_line: usize,
}

/// A turn a crash interrupted, in a session log that goes on after it.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[serde(rename_all = "camelCase")]
pub struct InterruptedTurn {
    /// The line of its `turn/start` (null: the log began inside it).
    pub turn_line: Option<usize>,
    /// Where the log shows the crash: the first result the harness's recovery wrote, or the
    /// next turn's `turn/start`.
    pub cut_line: usize,
    /// The lines of the results the harness's recovery wrote on reload (error codes
    /// `TOOL_OUTCOME_UNKNOWN`, `TOOL_NOT_STARTED`): not pipeline events, passed over.
    pub recovered_results: Vec<usize>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[serde(rename_all = "camelCase")]
pub struct UnknownType {
    #[serde(rename = "type")]
    pub kind: String,
    pub count: usize,
    pub first_line: usize,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[serde(rename_all = "camelCase")]
pub struct UnknownField {
    /// The event type.
    #[serde(rename = "type")]
    pub kind: String,
    /// Where in the event (`data.message.future`; `[]` for any element of an array).
    pub field: String,
    pub count: usize,
    pub first_line: usize,
}

/// One row of `tep scenarios list --format json`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScenarioRow {
    pub id: String,
    pub description: String,
    pub spec: String,
    pub revisions: Vec<Revision>,
    pub requires: Vec<Capability>,
    pub exercises: Vec<InvariantId>,
}

impl From<&Scenario> for ScenarioRow {
    fn from(s: &Scenario) -> Self {
        ScenarioRow {
            id: s.id.clone(),
            description: s.description.clone(),
            spec: s.spec.clone(),
            revisions: s.revisions.clone(),
            requires: s.requires.clone(),
            exercises: s.exercises.clone(),
        }
    }
}

/// One row of `tep invariants list --format json`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InvariantRow {
    pub id: InvariantId,
    pub level: Level,
    pub statement: String,
    pub revisions: Vec<Revision>,
    pub requires: Option<Capability>,
    pub observed: ObservationLevel,
    /// Where the spec says it.
    pub sources: Vec<String>,
    /// Its entry in docs/invariants.md.
    pub doc: String,
}

impl From<&Invariant> for InvariantRow {
    fn from(inv: &Invariant) -> Self {
        InvariantRow {
            id: inv.id,
            level: inv.level,
            statement: inv.statement.to_owned(),
            revisions: inv.revisions(),
            requires: inv.requires,
            observed: inv.observed,
            sources: inv.sources.iter().map(ToString::to_string).collect(),
            doc: inv.doc_link(),
        }
    }
}

/// The catalog's rows for `spec` (every revision's when `None`).
pub fn invariant_rows(spec: Option<Revision>) -> Vec<InvariantRow> {
    CATALOG
        .iter()
        .filter(|i| spec.is_none_or(|r| i.applies_to(r)))
        .map(InvariantRow::from)
        .collect()
}

/// `value` as pretty JSON, every object's keys in alphabetical order (see the module docs).
pub fn to_json_text<T: Serialize>(value: &T) -> serde_json::Result<String> {
    serde_json::to_string_pretty(&serde_json::to_value(value)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_come_out_in_alphabetical_order() {
        let row = NotCheckable {
            invariant: InvariantId::StageGraphWalk,
            why: "w".into(),
        };
        let text = to_json_text(&[row]).unwrap_or_default();
        assert_eq!(
            text,
            "[\n  {\n    \"invariant\": \"stage-graph-walk\",\n    \"why\": \"w\"\n  }\n]"
        );
        let rows = invariant_rows(Some(Revision::Rev2));
        let text = to_json_text(&rows[0]).unwrap_or_default();
        let keys: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("  \"")?.split('"').next())
            .collect();
        let mut sorted = keys.clone();
        sorted.sort_unstable();
        assert_eq!(keys, sorted);
    }
}
