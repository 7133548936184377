//! events.md: the trace records, how each stage is observed, the session events and results.

use std::fmt::Write as _;

use serde_json::Value;
use tep_check::required_fields;
use tep_model::graph::{Revision, StageGraph};
use tep_model::session::EventBody;
use tep_model::trace::TraceRecord;
use tep_model::vocabulary::TERMS;

use super::schema_tables::{Types, def_name, definition, schema_of};
use super::{cell, header};

pub fn events_page() -> String {
    let trace = schema_of::<TraceRecord>();
    let defs = &trace["$defs"];
    let mut types = Types::new(defs);
    let mut out = header("the trace and session types in reference/src/{trace,session}.rs");
    out.push_str("# Session events and stage observations\n\n");
    out.push_str(
        "A run produces a **trace**: JSON Lines, one record per line, in the order things happened. \
         It is what adapters return, what `tep check` reads and what the conformance checker judges. \
         The JSON Schema is [`schemas/trace-record.schema.json`](schemas/trace-record.schema.json); \
         the rules for producing one are in [adapter-protocol.md](adapter-protocol.md#recording-the-trace).\n\n",
    );
    out.push_str(&trace_records(&trace, &mut types));
    out.push_str(&stage_observations());
    out.push_str(&session_events(defs, &mut types));
    let anchor = types.describe("ToolResult");
    let _ = writeln!(
        out,
        "## Results\n\n{anchor}The outcome a stage hands on (`result` of `post`, `finalize`, `final`):\n"
    );
    out.push_str(&types.fields_table(&defs["ToolResult"]));
    let anchor = types.describe("AdditionalContext");
    let _ = writeln!(out, "\n{anchor}Each additional context:\n");
    out.push_str(&types.fields_table(&defs["AdditionalContext"]));
    out.push_str("\n## Names the docs use\n\n| name | what it is |\n|---|---|\n");
    for term in TERMS {
        let _ = writeln!(out, "| `{}` | {} |", term.name, cell(term.meaning));
    }
    out.push_str("\n## Types\n\nThe object types the tables above refer to.\n\n");
    out.push_str(&types.appendix());
    out
}

/// The "Trace records" section: what each `kind` of line is, and each one's fields.
fn trace_records(trace: &Value, types: &mut Types<'_>) -> String {
    let mut out = String::new();
    out.push_str("## Trace records\n\nEach line has a `kind`:\n\n");
    if let Some(kinds) = trace["oneOf"].as_array() {
        out.push_str("| `kind` | what the line is |\n|---|---|\n");
        for k in kinds {
            let name = k["properties"]["kind"]["const"].as_str().unwrap_or("?");
            let _ = writeln!(
                out,
                "| `{name}` | {} |",
                cell(k["description"].as_str().unwrap_or(""))
            );
        }
        out.push('\n');
        for (kind, def) in [
            ("header", "TraceHeader"),
            ("stage", "Observation"),
            ("event", "EventRecord"),
            ("mark", "Mark"),
        ] {
            let schema = kinds
                .iter()
                .find(|k| k["properties"]["kind"]["const"] == kind)
                .cloned()
                .unwrap_or(Value::Null);
            let _ = writeln!(out, "### `{kind}` records ({def})\n");
            out.push_str(&types.fields_table(&schema));
            out.push('\n');
        }
    }
    out
}

/// The "How each stage is observed" section: per revision, a table of the nodes, each with the
/// record that observes it and the fields that record requires.
fn stage_observations() -> String {
    let mut out = String::new();
    out.push_str("## How each stage is observed\n\n");
    out.push_str(
        "Stages that are session events are observed through the event itself (an `event` record); \
         every other stage is a `stage` record. A stage record always names its `node`, and its \
         `call` unless the node is per batch. The required fields follow from the graph: an \
         `outcome` wherever every edge out of the node is labeled (it selects the edge).\n\n",
    );
    for revision in Revision::ALL.into_iter().rev() {
        let graph = StageGraph::of(revision);
        let _ = writeln!(out, "### {revision}\n");
        out.push_str("| node | kind | phase | scope | observed as | required fields | outcomes |\n|---|---|---|---|---|---|---|\n");
        for node in graph.nodes() {
            let events: Vec<String> = EventBody::TYPES
                .iter()
                .filter(|t| EventBody::node_of(t) == Some(node.id))
                .map(|t| format!("`{t}`"))
                .collect();
            let observed = if events.is_empty() {
                "stage record".to_owned()
            } else {
                format!("event {}", events.join(", "))
            };
            let required: Vec<String> = required_fields(graph, node.id)
                .into_iter()
                .map(|f| format!("`{f}`"))
                .collect();
            let outcomes: Vec<String> = graph
                .decisive_outcomes(node.id)
                .into_iter()
                .map(|o| format!("`{o}`"))
                .collect();
            let _ = writeln!(
                out,
                "| `{}` | {} | {:?} | {:?} | {} | {} | {} |",
                node.id,
                node.kind.describe(),
                node.phase,
                node.scope,
                observed,
                required.join(", "),
                outcomes.join(", ")
            );
        }
        out.push('\n');
    }
    out
}

/// The "Session events" section: the envelope, then each event type's data.
fn session_events(defs: &Value, types: &mut Types<'_>) -> String {
    let mut out = String::new();
    let anchor = types.describe("SessionEvent");
    let _ = writeln!(
        out,
        "## Session events\n\n{anchor}Every event shares the envelope:\n"
    );
    out.push_str(&types.fields_table(&defs["SessionEvent"]));
    out.push_str("\nplus `type` and `data`:\n\n");
    let variants = defs["SessionEvent"]["oneOf"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for ty in EventBody::TYPES {
        let Some(variant) = variants
            .iter()
            .find(|v| v["properties"]["type"]["const"] == ty)
        else {
            continue;
        };
        let _ = writeln!(out, "### `{ty}`\n");
        let node = EventBody::node_of(ty).map_or_else(
            || "part of the `approval` stage (not a node of its own)".to_owned(),
            |n| format!("observes node `{n}`"),
        );
        let _ = writeln!(
            out,
            "{} It {node}.\n",
            variant["description"].as_str().unwrap_or("")
        );
        let data = def_name(variant["properties"]["data"]["$ref"].as_str().unwrap_or(""));
        let shapes = definition(defs, data);
        out.push_str(&types.describe(data));
        out.push('\n');
        for schema in &shapes {
            if shapes.len() > 1 {
                let _ = writeln!(out, "{}\n", schema["description"].as_str().unwrap_or(""));
            }
            out.push_str(&types.fields_table(schema));
            out.push('\n');
        }
    }
    out
}
