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

/// How much of a trace is read at once.
const CHUNK_BYTES: usize = 256 * 1024;

/// Parses one line of a trace.
///
/// A record that leads with its tag (as every trace this toolkit writes does) is read in one
/// typed pass ([`TraceRecord::from_json_tag_first`]); anything else, and every error, goes
/// through a `serde_json::Value`, which accepts the same records and words the errors.
#[inline]
pub fn parse_record(line_no: usize, text: &str) -> Result<TraceRecord, TraceError> {
    TraceRecord::from_json_tag_first(text).or_else(|_| parse_record_in_words(line_no, text))
}

/// Parses one line of a trace the slow way, which accepts the fields in any order and says what
/// is wrong in words. A field named twice is an error, as in every other message tep reads
/// (docs/limits.md): a reader keeping the first value would see another trace.
fn parse_record_in_words(line_no: usize, text: &str) -> Result<TraceRecord, TraceError> {
    // Straight into the record first: serde's derived reader refuses a repeated field.
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
///
/// Reads the trace in large chunks and parses each line where it lies in the chunk: only a line
/// that straddles two chunks is moved (to the front, before the next read).
pub fn for_each_record(
    mut reader: impl BufRead,
    mut f: impl FnMut(usize, TraceRecord) -> Result<(), TraceError>,
) -> Result<(), TraceError> {
    let mut buf = vec![0u8; CHUNK_BYTES];
    // The unparsed bytes are `buf[start..end]`; `scanned` of them hold no newline.
    let (mut start, mut end, mut scanned) = (0, 0, 0);
    let mut line_no = 0;
    loop {
        // The chunk's complete lines are checked as UTF-8 at once; if they are not all valid,
        // line by line, so that the error names the line.
        let region = start;
        let valid = memchr::memrchr(b'\n', &buf[start + scanned..end])
            .and_then(|i| std::str::from_utf8(&buf[start..start + scanned + i + 1]).ok());
        while let Some(i) = memchr::memchr(b'\n', &buf[start + scanned..end]) {
            let line_end = start + scanned + i + 1;
            line_no += 1;
            if line_end - start > MAX_LINE_BYTES {
                return Err(too_long(line_no));
            }
            match valid {
                // Both ends follow a newline (or start the region): char boundaries.
                Some(text) => {
                    parse_text(line_no, &text[start - region..line_end - region], &mut f)?
                }
                None => parse_line(line_no, &buf[start..line_end], &mut f)?,
            }
            start = line_end;
            scanned = 0;
        }
        scanned = end - start;
        if scanned > MAX_LINE_BYTES {
            return Err(too_long(line_no + 1));
        }
        // Keep the partial line, at the front; grow only for a line longer than a chunk.
        buf.copy_within(start..end, 0);
        (start, end) = (0, scanned);
        if end == buf.len() {
            buf.resize((buf.len() * 2).min(MAX_LINE_BYTES + 1), 0);
        }
        let n = loop {
            match reader.read(&mut buf[end..]) {
                Ok(n) => break n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    return Err(TraceError::new(line_no + 1, format!("cannot read: {e}")));
                }
            }
        };
        if n == 0 {
            // The last line may lack its newline.
            if end > 0 {
                parse_line(line_no + 1, &buf[..end], &mut f)?;
            }
            return Ok(());
        }
        end += n;
    }
}

fn too_long(line_no: usize) -> TraceError {
    TraceError::new(line_no, format!("line longer than {MAX_LINE_BYTES} bytes"))
}

/// One line's bytes, with its newline if it has one.
fn parse_line(
    line_no: usize,
    bytes: &[u8],
    f: &mut impl FnMut(usize, TraceRecord) -> Result<(), TraceError>,
) -> Result<(), TraceError> {
    let text = std::str::from_utf8(bytes).map_err(|e| {
        TraceError::new(
            line_no,
            format!("not valid UTF-8 (at byte {})", e.valid_up_to()),
        )
    })?;
    parse_text(line_no, text, f)
}

/// One line, with its newline if it has one.
fn parse_text(
    line_no: usize,
    text: &str,
    f: &mut impl FnMut(usize, TraceRecord) -> Result<(), TraceError>,
) -> Result<(), TraceError> {
    let text = text.trim_end_matches(['\n', '\r']);
    if text.trim().is_empty() {
        return Ok(());
    }
    f(line_no, parse_record(line_no, text)?)
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
        // After good lines of the same chunk: they are read, then the bad one is named.
        let mut input = b"{\"kind\":\"stage\",\"node\":\"allResults\"}\n\n".to_vec();
        input.extend_from_slice(b"{\"kind\":\"stage\",\"node\":\"\xff\"}\n{}\n");
        let mut read = 0;
        let e = for_each_record(&input[..], |_, _| {
            read += 1;
            Ok(())
        })
        .unwrap_err();
        assert_eq!((read, e.line), (1, 3));
        assert_eq!(e.message, "not valid UTF-8 (at byte 24)");
    }

    /// Every line this toolkit writes: the corpus mix of both revisions and each built shape.
    fn written_lines() -> Vec<String> {
        use crate::generate::{Shape, records};
        let mut shapes: Vec<Shape> = tep_reference::graph::Revision::ALL
            .into_iter()
            .map(Shape::CorpusMix)
            .collect();
        shapes.extend([
            Shape::WideBatch(3),
            Shape::LongProgram(3),
            Shape::ManyContexts {
                calls: 2,
                contexts: 2,
            },
        ]);
        let mut lines = Vec::new();
        for shape in shapes {
            let records = records(shape).unwrap_or_else(|e| panic!("{e}"));
            lines.extend(
                tep_reference::trace::to_jsonl(&records)
                    .lines()
                    .map(str::to_owned),
            );
        }
        lines.sort();
        lines.dedup();
        lines
    }

    fn words(line: &str) -> Result<TraceRecord, String> {
        parse_record_in_words(7, line).map_err(|e| e.to_string())
    }

    #[test]
    fn every_written_record_takes_the_single_pass_and_reads_the_same() {
        let lines = written_lines();
        assert!(lines.len() > 500, "{} distinct lines", lines.len());
        for line in &lines {
            let fast =
                TraceRecord::from_json_tag_first(line).unwrap_or_else(|e| panic!("{e}: {line}"));
            assert_eq!(Ok(fast), words(line), "{line}");
        }
    }

    #[test]
    fn records_in_another_order_take_the_worded_path() {
        let tag_later = r#"{"node":"pre","call":"c1","outcome":"deny","kind":"stage"}"#;
        assert!(TraceRecord::from_json_tag_first(tag_later).is_err());
        let data_first = r#"{"kind":"event","call":"c1","event":{"seq":1,"time":0,"data":{"turn":1,"step":1,"callId":"c1","name":"read","arguments":"{}"},"type":"tool/call"}}"#;
        assert!(TraceRecord::from_json_tag_first(data_first).is_err());
        for line in [tag_later, data_first] {
            assert_eq!(
                parse_record(7, line).map_err(|e| e.to_string()),
                words(line)
            );
            assert!(words(line).is_ok(), "{line}");
        }
    }

    /// A field of a JSON line: where its key starts, and where its value starts and ends.
    #[derive(Debug, Clone, Copy)]
    struct Field {
        key: usize,
        value: usize,
        end: usize,
    }

    /// Every field of every object of a line, and every place a field could be inserted (after
    /// each `{` and `,`; inside an array that makes invalid JSON, which both paths must refuse
    /// alike).
    fn fields(line: &str) -> (Vec<Field>, Vec<usize>) {
        let bytes = line.as_bytes();
        let (mut fields, mut slots) = (Vec::new(), Vec::new());
        // Open objects and arrays; per open object, the field whose value is being read.
        let mut open: Vec<Option<Field>> = Vec::new();
        let (mut in_string, mut escaped, mut string_start) = (false, false, 0);
        let close_value = |open: &mut Vec<Option<Field>>, fields: &mut Vec<Field>, at| {
            if let Some(Some(mut f)) = open.pop() {
                f.end = at;
                fields.push(f);
            }
            open.push(None);
        };
        for (i, &b) in bytes.iter().enumerate() {
            match (in_string, escaped, b) {
                (true, true, _) => escaped = false,
                (true, false, b'\\') => escaped = true,
                (true, false, b'"') => in_string = false,
                (false, _, b'"') => {
                    in_string = true;
                    string_start = i;
                }
                (false, _, b':') => {
                    if let Some(top) = open.last_mut() {
                        *top = Some(Field {
                            key: string_start,
                            value: i + 1,
                            end: i + 1,
                        });
                    }
                }
                (false, _, b'{' | b'[') => {
                    slots.push(i + 1);
                    open.push(None);
                }
                (false, _, b',') => {
                    slots.push(i + 1);
                    close_value(&mut open, &mut fields, i);
                }
                (false, _, b'}' | b']') => {
                    close_value(&mut open, &mut fields, i);
                    open.pop();
                }
                _ => {}
            }
        }
        (fields, slots)
    }

    /// A line with one thing changed.
    fn mutate(
        line: &str,
        how: usize,
        at: proptest::sample::Index,
        key: &str,
        value: &str,
    ) -> String {
        let (fields, slots) = fields(line);
        let field = *at.get(&fields);
        match how {
            // A field inserted (repeated, unknown, or of another type than the record's own).
            0 => {
                let i = *at.get(&slots);
                let separator = if line[i..].starts_with(['}', ']']) {
                    ""
                } else {
                    ","
                };
                format!(r#"{}"{key}":{value}{separator}{}"#, &line[..i], &line[i..])
            }
            // A value replaced.
            1 => format!("{}{value}{}", &line[..field.value], &line[field.end..]),
            // A key renamed.
            2 => format!(
                r#"{}"{key}"{}"#,
                &line[..field.key],
                &line[field.value - 1..]
            ),
            // A field removed, with the comma after it (or before it, for the last one).
            _ => {
                let rest = &line[field.end..];
                match rest.strip_prefix(',') {
                    Some(rest) => format!("{}{rest}", &line[..field.key]),
                    None => {
                        let before = line[..field.key].trim_end_matches(',');
                        format!("{before}{rest}")
                    }
                }
            }
        }
    }

    /// Field names the records use (so an insertion repeats one), and one no record has.
    const KEYS: &[&str] = &[
        "kind",
        "node",
        "call",
        "outcome",
        "identity",
        "result",
        "calls",
        "parent",
        "event",
        "seq",
        "time",
        "type",
        "data",
        "surfaceOp",
        "callId",
        "turn",
        "message",
        "content",
        "isError",
        "text",
        "token",
        "name",
        "arguments",
        "mark",
        "by",
        "extra",
    ];
    /// Values of every JSON type, and enum spellings the worded path treats apart.
    const VALUES: &[&str] = &[
        "null",
        "1",
        "-1",
        "1.5",
        "true",
        r#""x""#,
        r#""pre""#,
        r#""stage""#,
        r#""tool/call""#,
        r#"{"pre":null}"#,
        "[]",
        "{}",
        r#"["c1"]"#,
        r#""c1""#,
    ];

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(3000))]

        /// Whatever a line holds (a field repeated, unknown, missing, of another type, an enum
        /// spelled as a map), `parse_record` answers exactly what the worded path answers: the
        /// single pass never accepts a record the worded path refuses or reads differently.
        #[test]
        fn the_single_pass_agrees_with_the_worded_path(
            pick in proptest::prelude::any::<proptest::sample::Index>(),
            how in 0..4usize,
            at in proptest::prelude::any::<proptest::sample::Index>(),
            key in 0..KEYS.len(),
            value in 0..VALUES.len(),
        ) {
            thread_local! {
                static LINES: Vec<String> = written_lines();
            }
            let line = LINES.with(|lines| pick.get(lines).clone());
            let mutated = mutate(&line, how, at, KEYS[key], VALUES[value]);
            proptest::prop_assert_eq!(
                parse_record(7, &mutated).map_err(|e| e.to_string()),
                words(&mutated),
                "{}", mutated
            );
        }
    }
}
