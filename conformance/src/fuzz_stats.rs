//! The constructs of the scenario language a scenario uses: `tep fuzz --stats` counts them over
//! a run, and a test requires every construct to be reachable by the generator (what it cannot
//! write, fuzzing cannot find).
//!
//! A construct is a path into the scenario's JSON with call ids classed (`<call>`, `<sub-call>`,
//! `*`) and, for a string that names a variant (`"pass"`, `"allowed-once"`, `"hang"`, a wrapper's
//! `kind`), the value: `pre[].decide.<sub-call>.deny`, `approval.answers.*=allowed-once`,
//! `calls[].body[]=hang`. A few constructs span several parts: a write then an edit of one file,
//! two asks for one tool, and the order of two wrappers.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::scenario::limits::DESCRIPTIVE_FIELDS;
use crate::scenario::{BodyStep, PreAction, ProgramStep, Scenario};

/// Keys that hold no construct beside the scenario's descriptive fields
/// ([`DESCRIPTIVE_FIELDS`]): names, bookkeeping, free-form data.
const SKIPPED: &[&str] = &["arguments", "callId", "name", "handlerId", "point"];

/// Keys whose value is free-form data (JSON a script returns, file names and contents): the key
/// is a construct, what is under it is not.
const DATA: &[&str] = &["return", "rewrite", "value", "files"];

/// Maps keyed by call id.
const BY_CALL: &[&str] = &["decide", "answers"];

/// Keys whose string value names a variant.
const VARIANT_KEYS: &[&str] = &["kind", "phase", "onReject", "finalize", "status"];

/// Every construct `scenario` uses.
pub fn constructs(scenario: &Scenario) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    if let Ok(v) = serde_json::to_value(scenario) {
        walk(&v, "", false, &mut out);
    }
    out.extend(spanning(scenario));
    out
}

fn class(call: &str) -> &'static str {
    if call == "*" {
        "*"
    } else if call.contains(":code:") {
        "<sub-call>"
    } else {
        "<call>"
    }
}

/// Records the constructs under `v`, at `path`; `variant` says a string here names a variant.
fn walk(v: &Value, path: &str, variant: bool, out: &mut BTreeSet<String>) {
    match v {
        Value::Object(map) => {
            let by_call = BY_CALL.iter().any(|k| path.ends_with(k));
            for (key, value) in map {
                if !by_call
                    && (SKIPPED.contains(&key.as_str())
                        || DESCRIPTIVE_FIELDS.contains(&key.as_str()))
                {
                    continue;
                }
                let segment = if by_call { class(key) } else { key.as_str() };
                let here = if path.is_empty() {
                    segment.to_owned()
                } else {
                    format!("{path}.{segment}")
                };
                out.insert(here.clone());
                if !by_call && DATA.contains(&key.as_str()) {
                    continue;
                }
                walk(
                    value,
                    &here,
                    by_call || VARIANT_KEYS.contains(&key.as_str()),
                    out,
                );
            }
        }
        Value::Array(items) => {
            let here = format!("{path}[]");
            // A string in a list of steps is a step of its own (`"hang"`, `"callRunCode"`).
            let steps = path.ends_with("body") || path.ends_with("program");
            for item in items {
                walk(item, &here, steps, out);
            }
        }
        Value::String(s) if variant => {
            out.insert(format!("{path}={s}"));
        }
        Value::Bool(b) => {
            out.insert(format!("{path}={b}"));
        }
        _ => {}
    }
}

/// The constructs that span several parts of a scenario.
fn spanning(scenario: &Scenario) -> Vec<String> {
    let mut out = Vec::new();
    // A write, then an edit of the same file, in the order the bodies run.
    let mut written = BTreeSet::new();
    let bodies = scenario.calls.iter().flat_map(|c| {
        std::iter::once(&c.body).chain(c.program.iter().flatten().flat_map(|s| match s {
            ProgramStep::Call(b) => vec![&b.body],
            ProgramStep::All(bs) => bs.iter().map(|b| &b.body).collect(),
            _ => vec![],
        }))
    });
    for step in bodies.flatten() {
        match step {
            BodyStep::Write(w) => {
                written.insert(w.path.clone());
            }
            BodyStep::Edit(e) if written.contains(&e.path) => {
                out.push("span: a write then an edit of the same file".to_owned());
            }
            _ => {}
        }
    }
    // Two calls of one tool that a pre-execute listener both sends to the prompt.
    for listener in &scenario.pre {
        let mut asks: BTreeMap<&str, usize> = BTreeMap::new();
        for call in &scenario.calls {
            let action = listener
                .decide
                .get(call.call_id.as_str())
                .or_else(|| listener.decide.get("*"));
            if matches!(action, Some(PreAction::Ask(_))) {
                *asks.entry(call.tool.as_str()).or_default() += 1;
            }
        }
        if asks.values().any(|&n| n >= 2) {
            out.push("span: two asks for one tool".to_owned());
        }
    }
    // The order of the declared wrappers, pair by pair.
    let kinds: Vec<String> = scenario
        .wrappers
        .iter()
        .filter_map(|w| serde_json::to_value(w).ok())
        .filter_map(|v| v.get("kind").and_then(Value::as_str).map(str::to_owned))
        .collect();
    for (i, outer) in kinds.iter().enumerate() {
        for inner in &kinds[i + 1..] {
            if outer != inner {
                out.push(format!("span: wrapper {outer} outside {inner}"));
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// How often each construct appeared in `scenarios`.
pub fn count<'a>(scenarios: impl IntoIterator<Item = &'a Scenario>) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for scenario in scenarios {
        for c in constructs(scenario) {
            *counts.entry(c).or_default() += 1;
        }
    }
    counts
}
