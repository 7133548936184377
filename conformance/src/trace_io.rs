//! Reading traces: JSON Lines from a file or stdin, one record per line, with errors that name
//! the line and say what is wrong in words (not only serde's).

use std::io::BufRead;

use serde_json::Value;
use tep_reference::graph::NodeId;
use tep_reference::trace::TraceRecord;

use crate::checker::{CheckOptions, CheckReport, Checker, TraceError};

/// `times` copies of a trace's records one after the other, with session seqs (and the seqs
/// events name) renumbered so the log stays increasing; a header line is dropped. Call ids may
/// repeat from one batch to the next, as they may in a real session. For load tests and
/// benchmarks of the streaming checker.
pub fn repeat_batches(records: &[TraceRecord], times: usize) -> Vec<TraceRecord> {
    let one: Vec<&TraceRecord> = records
        .iter()
        .filter(|r| !matches!(r, TraceRecord::Header(_)))
        .collect();
    let events = one
        .iter()
        .filter(|r| matches!(r, TraceRecord::Event(_)))
        .count() as u64;
    let mut out = Vec::with_capacity(one.len() * times);
    for k in 0..times as u64 {
        for record in &one {
            let mut record = (*record).clone();
            if let TraceRecord::Event(e) = &mut record {
                e.event.seq += k * events;
                if let Some(sources) = e.event.source_event_seqs.as_mut() {
                    sources.iter_mut().for_each(|s| *s += k * events);
                }
            }
            out.push(record);
        }
    }
    out
}

/// Lines longer than this are refused rather than buffered.
pub const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// Parses one line of a trace. A field named twice is an error, as in every other message tep
/// reads (docs/limits.md): a reader keeping the first value would see another trace.
pub fn parse_record(line_no: usize, text: &str) -> Result<TraceRecord, TraceError> {
    // Straight into the record: one pass, and serde refuses a repeated field.
    let direct = serde_json::from_str::<TraceRecord>(text);
    if let Ok(record) = direct {
        return Ok(record);
    }
    // Otherwise say what is wrong in words; through a `Value` a repeated field would go unseen.
    let value: Value = serde_json::from_str(text)
        .map_err(|e| TraceError::new(line_no, format!("invalid JSON: {e}")))?;
    let Value::Object(map) = &value else {
        return Err(TraceError::new(
            line_no,
            "a trace record must be a JSON object",
        ));
    };
    let kind = match map.get("kind") {
        Some(Value::String(k)) => k.clone(),
        Some(_) => return Err(TraceError::new(line_no, "field `kind` must be a string")),
        None => {
            return Err(TraceError::new(
                line_no,
                "missing field `kind` (one of: header, stage, event, mark)",
            ));
        }
    };
    match kind.as_str() {
        "stage" => match map.get("node") {
            Some(Value::String(node)) => {
                node.parse::<NodeId>()
                    .map_err(|_| TraceError::new(line_no, format!("unknown stage `{node}`")))?;
            }
            Some(_) => return Err(TraceError::new(line_no, "field `node` must be a string")),
            None => {
                return Err(TraceError::new(
                    line_no,
                    "missing field `node` in a stage record",
                ));
            }
        },
        "event" => {
            if !map.contains_key("event") {
                return Err(TraceError::new(
                    line_no,
                    "missing field `event` in an event record",
                ));
            }
        }
        "header" | "mark" => {}
        other => {
            return Err(TraceError::new(
                line_no,
                format!("unknown record kind `{other}` (one of: header, stage, event, mark)"),
            ));
        }
    }
    let error = match (serde_json::from_value::<TraceRecord>(value), direct) {
        (Err(e), _) | (Ok(_), Err(e)) => e,
        (Ok(record), Ok(_)) => return Ok(record),
    };
    Err(TraceError::new(line_no, format!("{kind} record: {error}")))
}

/// Reads every record of a trace into memory.
pub fn read_records(reader: impl BufRead) -> Result<Vec<TraceRecord>, TraceError> {
    let mut out = Vec::new();
    for_each_record(reader, |_, record| {
        out.push(record);
        Ok(())
    })?;
    Ok(out)
}

/// Checks a trace in one pass without keeping it: memory is bounded by the open batch.
pub fn check_reader(
    options: &CheckOptions,
    reader: impl BufRead,
) -> Result<CheckReport, TraceError> {
    let mut checker = Checker::new(options.clone());
    for_each_record(reader, |line, record| checker.feed(line, &record))?;
    checker.finish()
}

/// Calls `f` with each record and its line number. Blank lines are skipped.
pub fn for_each_record(
    mut reader: impl BufRead,
    mut f: impl FnMut(usize, TraceRecord) -> Result<(), TraceError>,
) -> Result<(), TraceError> {
    let mut buf = Vec::new();
    let mut line_no = 0;
    loop {
        buf.clear();
        line_no += 1;
        let n =
            read_line_bounded(&mut reader, &mut buf).map_err(|e| TraceError::new(line_no, e))?;
        if n == 0 {
            return Ok(());
        }
        let text = std::str::from_utf8(&buf).map_err(|e| {
            TraceError::new(
                line_no,
                format!("not valid UTF-8 (at byte {})", e.valid_up_to()),
            )
        })?;
        let text = text.trim_end_matches(['\n', '\r']);
        if text.trim().is_empty() {
            continue;
        }
        f(line_no, parse_record(line_no, text)?)?;
    }
}

/// Reads up to and including the next `\n`, refusing lines over [`MAX_LINE_BYTES`].
fn read_line_bounded(reader: &mut impl BufRead, buf: &mut Vec<u8>) -> Result<usize, String> {
    let mut total = 0;
    loop {
        let available = reader.fill_buf().map_err(|e| format!("cannot read: {e}"))?;
        if available.is_empty() {
            return Ok(total);
        }
        let (used, done) = match available.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (available.len(), false),
        };
        if buf.len() + used > MAX_LINE_BYTES {
            return Err(format!("line longer than {MAX_LINE_BYTES} bytes"));
        }
        buf.extend_from_slice(&available[..used]);
        reader.consume(used);
        total += used;
        if done {
            return Ok(total);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        parse_record(3, text).map(|_| ()).unwrap_err().to_string()
    }

    #[test]
    fn names_what_is_wrong() {
        assert_eq!(
            err("{oops"),
            "line 3: invalid JSON: key must be a string at line 1 column 2"
        );
        assert_eq!(err("[1]"), "line 3: a trace record must be a JSON object");
        assert_eq!(
            err(r#"{"node":"pre"}"#),
            "line 3: missing field `kind` (one of: header, stage, event, mark)"
        );
        assert_eq!(
            err(r#"{"kind":"stage","node":"pree"}"#),
            "line 3: unknown stage `pree`"
        );
        assert_eq!(
            err(r#"{"kind":"stage"}"#),
            "line 3: missing field `node` in a stage record"
        );
        assert_eq!(
            err(r#"{"kind":"wat"}"#),
            "line 3: unknown record kind `wat` (one of: header, stage, event, mark)"
        );
        assert!(
            err(r#"{"kind":"stage","node":"pre","outcome":"maybe"}"#)
                .starts_with("line 3: stage record: unknown variant `maybe`")
        );
    }

    #[test]
    fn a_field_named_twice_is_an_error() {
        assert!(
            err(r#"{"kind":"stage","node":"pre","node":"post","call":"c1","outcome":"allow"}"#)
                .starts_with("line 3: stage record: duplicate field `node`"),
            "{}",
            err(r#"{"kind":"stage","node":"pre","node":"post","call":"c1","outcome":"allow"}"#)
        );
    }

    #[test]
    fn rejects_non_utf8_with_its_line() {
        let input: &[u8] = b"\n\xff\xfe\n";
        let e = read_records(input).unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.message.contains("UTF-8"));
    }
}
