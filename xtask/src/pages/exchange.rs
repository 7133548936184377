//! The worked adapter exchange (adapter-protocol.md).

use std::fmt::Write as _;

use serde_json::Value;
use tep_conformance::scenario::Scenario;
use tep_model::graph::Revision;

/// A real exchange with the reference adapter, as Markdown: each message pretty-printed.
pub fn adapter_exchange(corpus: &[Scenario]) -> Result<String, String> {
    use tep_conformance::protocol::{PROTOCOL_VERSION, Request};
    let scenario = corpus
        .iter()
        .find(|s| s.id == "pre-deny-skips-body")
        .ok_or("the worked example uses scenario pre-deny-skips-body, which is missing")?;
    let requests = [
        Request::Start {
            protocol: PROTOCOL_VERSION,
        },
        Request::Run {
            seq: 1,
            spec: Revision::Rev2,
            scenario: Box::new(scenario.clone()),
        },
        Request::Stop,
    ];
    let input: String = requests
        .iter()
        .map(|r| serde_json::to_string(r).map(|l| l + "\n"))
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    let mut output = Vec::new();
    tep_conformance::serve::serve_reference(vec![], input.as_bytes(), &mut output)
        .map_err(|e| e.to_string())?;
    let answers: Vec<Value> = String::from_utf8_lossy(&output)
        .lines()
        .map(serde_json::from_str)
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    let pretty = |v: &Value| serde_json::to_string_pretty(v).unwrap_or_default();
    let request_values: Vec<Value> = requests
        .iter()
        .map(|r| serde_json::to_value(r).unwrap_or(Value::Null))
        .collect();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "The runner starts the adapter and sends, on one line:\n\n```json\n{}\n```\n",
        input.lines().next().unwrap_or("")
    );
    let _ = writeln!(
        out,
        "The adapter answers that it is ready (pretty-printed here; on the wire every message is one line):\n\n```json\n{}\n```\n",
        pretty(&answers[0])
    );
    let _ = writeln!(
        out,
        "The runner sends scenario `{}` with sequence number 1:\n\n```json\n{}\n```\n",
        scenario.id,
        pretty(&request_values[1])
    );
    let _ = writeln!(
        out,
        "The adapter runs it and answers with the trace, in order (`seq` echoes the request):\n\n```json\n{}\n```\n",
        pretty(&answers[1])
    );
    let _ = writeln!(
        out,
        "After the last scenario the runner sends\n\n```json\n{}\n```\n\nand the adapter exits.",
        serde_json::to_string(&request_values[2]).unwrap_or_default()
    );
    Ok(out)
}
