//! The published JSON Schemas (docs/schemas/).

use serde_json::Value;
use tep_model::trace::TraceRecord;

use super::schema_tables::schema_of;

/// `(file name, schema)` of every published JSON Schema.
pub fn schemas() -> Vec<(&'static str, Value)> {
    use tep_conformance::{baseline, listing, protocol, report};
    vec![
        (
            "scenario.schema.json",
            tep_conformance::scenario::versions::schema(),
        ),
        ("trace-record.schema.json", schema_of::<TraceRecord>()),
        (
            "protocol-request.schema.json",
            schema_of::<protocol::Request>(),
        ),
        ("protocol-ready.schema.json", schema_of::<protocol::Ready>()),
        (
            "protocol-answer.schema.json",
            schema_of::<protocol::RunAnswer>(),
        ),
        (
            "baseline.schema.json",
            schema_of::<baseline::BaselineFile>(),
        ),
        ("run-report.schema.json", schema_of::<report::JsonReport>()),
        (
            "check-report.schema.json",
            schema_of::<listing::CheckJson>(),
        ),
        (
            "scenario-list.schema.json",
            schema_of::<Vec<listing::ScenarioRow>>(),
        ),
        (
            "invariant-list.schema.json",
            schema_of::<Vec<listing::InvariantRow>>(),
        ),
    ]
}
