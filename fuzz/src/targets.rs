//! The properties each input must keep. A target returns the case's outcome in a few words (its
//! signature: the driver keeps inputs that reach a new one) or a broken property. Panics are the
//! driver's to catch.
//!
//! - Nothing panics.
//! - Every error is typed and placed: a `TraceError` names a line of the input (or the line after
//!   the last, for the end of input); a violation's witness lines are lines of the input; a
//!   scenario error names the scenario.
//! - `tep check`'s parallel reader reports exactly what the one-thread reader does.
//! - The single pass (`TraceRecord::from_json_tag_first`) reads a line only as serde's derived
//!   reader does.
//! - The reference never produces a malformed trace for a scenario the decoder accepts.
//! - The reference adapter only ever writes protocol messages.
//! - The checker's memory does not grow with the length of a trace made of one garbage chunk
//!   repeated ([`checker_memory_growth`]).

use std::collections::BTreeSet;
use std::io::{BufRead, Read};

use tep_check::{CheckOptions, Checker, check_records};
use tep_check::{check_reader, check_reader_parallel, for_each_record, parse_record};
use tep_conformance::protocol::{Ready, RunAnswer, RunOutcome};
use tep_conformance::scenario::Scenario;
use tep_conformance::scripted::run_reference;
use tep_conformance::serve::serve_reference_with_notes;
use tep_model::graph::Revision;
use tep_model::trace::{Capability, ObservationLevel, TraceRecord};
use tep_reference::mutant::Mutant;

use crate::Target;

/// A broken property, in words.
pub type Broken = String;

/// Runs one input through a target.
pub fn run(target: Target, input: &[u8]) -> Result<String, Broken> {
    match target {
        Target::Trace => trace(input),
        Target::Scenario => scenario(input),
        Target::Protocol => protocol(input),
    }
}

/// Lines as `for_each_record` counts them.
fn line_count(input: &[u8]) -> usize {
    let newlines = input.iter().filter(|&&b| b == b'\n').count();
    newlines + usize::from(input.last().is_some_and(|&b| b != b'\n'))
}

/// A message without its particulars (numbers, quoted names), so that "line 3: unknown stage
/// `x`" and "line 7: unknown stage `y`" count as one outcome.
fn shape(message: &str) -> String {
    message
        .split(['`', '"'])
        .next()
        .unwrap_or_default()
        .chars()
        .filter(|c| !c.is_ascii_digit())
        .take(64)
        .collect()
}

/// A hash of the input, from which the checker's options are chosen.
fn input_bits(input: &[u8]) -> u32 {
    input
        .iter()
        .fold(0u32, |h, &b| h.rotate_left(5) ^ u32::from(b))
}

/// The observation level chosen from the input, so that every level gets checked sometimes.
fn level(input: &[u8]) -> ObservationLevel {
    let index = (input_bits(input) >> 24) as usize % ObservationLevel::ALL.len();
    ObservationLevel::ALL[index]
}

/// Capabilities chosen from the input, so that every subset gets checked sometimes.
fn capabilities(input: &[u8]) -> Option<BTreeSet<Capability>> {
    let bits = input_bits(input);
    if bits & 1 == 0 {
        return None;
    }
    Some(
        Capability::ALL
            .into_iter()
            .enumerate()
            .filter(|(i, _)| bits & (2 << i) != 0)
            .map(|(_, c)| c)
            .collect(),
    )
}

fn trace(input: &[u8]) -> Result<String, Broken> {
    let lines = line_count(input);
    let mut signature = Vec::new();
    for revision in Revision::ALL {
        let options = with_capabilities(
            CheckOptions::new(revision).observed(level(input)),
            capabilities(input),
        );
        let report = check_reader(&options, input);
        if check_reader_parallel(&options, input, 2) != report {
            return Err(format!(
                "read on worker threads, the trace gets another report than on one ({revision})"
            ));
        }
        match report {
            Err(e) => {
                if e.line == 0 || e.line > lines + 1 {
                    return Err(format!(
                        "a TraceError names line {} of a {lines}-line input: {e}",
                        e.line
                    ));
                }
                signature.push(shape(&e.message));
            }
            Ok(report) => {
                if report.records > lines {
                    return Err(format!(
                        "{} records counted in {lines} lines",
                        report.records
                    ));
                }
                for v in &report.violations {
                    if let Some(&line) = v.lines.iter().find(|&&l| l == 0 || l > lines) {
                        return Err(format!(
                            "a {} violation names line {line} of a {lines}-line input: {}",
                            v.invariant, v.message
                        ));
                    }
                }
                let ids: BTreeSet<String> = report
                    .violations
                    .iter()
                    .map(|v| v.invariant.to_string())
                    .collect();
                signature.push(ids.into_iter().collect::<Vec<_>>().join(","));
            }
        }
    }
    // Line by line, `parse_record` places its errors on the line it was given, and the single
    // pass reads a line only as serde's derived reader (the general path) reads it.
    for (i, line) in input.split(|&b| b == b'\n').enumerate().take(64) {
        let Ok(text) = std::str::from_utf8(line) else {
            continue;
        };
        if let Err(e) = parse_record(i + 1, text)
            && e.line != i + 1
        {
            return Err(format!("parse_record({}) blamed line {}", i + 1, e.line));
        }
        if let Some(fast) = TraceRecord::from_json_tag_first(text)
            && serde_json::from_str::<TraceRecord>(text).ok().as_ref() != Some(&fast)
        {
            return Err(format!(
                "the single pass reads line {} otherwise than the general path",
                i + 1
            ));
        }
    }
    Ok(signature.join(" | "))
}

fn scenario(input: &[u8]) -> Result<String, Broken> {
    let text = String::from_utf8_lossy(input);
    let scenario = match Scenario::from_json(&text) {
        Err(e) => {
            let message = e.to_string();
            if e.id.is_empty() || !message.starts_with(&format!("scenario {}: ", e.id)) {
                return Err(format!(
                    "a scenario error that names no scenario: {message}"
                ));
            }
            return Ok(format!("refused: {}", shape(&e.message)));
        }
        Ok(s) => s,
    };
    let mut signature = vec!["accepted".to_owned()];
    for revision in Revision::ALL
        .into_iter()
        .filter(|&r| scenario.applies_to(r))
    {
        match run_reference(&scenario, revision, &[]) {
            Err(message) => {
                if !message.contains(&scenario.id) {
                    return Err(format!(
                        "a reference error that names no scenario: {message}"
                    ));
                }
                signature.push(shape(&message));
            }
            Ok(records) => match check_records(&CheckOptions::new(revision), &records) {
                Err(e) => {
                    return Err(format!(
                        "the reference's own {revision} trace of {} is malformed: {e}",
                        scenario.id
                    ));
                }
                Ok(report) => {
                    let ids: BTreeSet<String> = report
                        .violations
                        .iter()
                        .map(|v| v.invariant.to_string())
                        .collect();
                    signature.push(ids.into_iter().collect::<Vec<_>>().join(","));
                }
            },
        }
    }
    // A mutant chosen by the input: its trace breaks invariants, never the reader.
    let mutant = Mutant::ALL[input.len() % Mutant::ALL.len()];
    if let Ok(records) = run_reference(&scenario, Revision::Rev2, &[mutant]) {
        let _ = check_records(&CheckOptions::new(Revision::Rev2), &records);
    }
    Ok(signature.join(" | "))
}

fn protocol(input: &[u8]) -> Result<String, Broken> {
    let mut signature = Vec::new();
    // Requests, as `tep reference-adapter` reads them.
    let mut output = Vec::new();
    serve_reference_with_notes(vec![], input, &mut output, std::io::sink())
        .map_err(|e| format!("the reference adapter failed on in-memory input: {e}"))?;
    for line in String::from_utf8_lossy(&output).lines() {
        if let Ok(answer) = serde_json::from_str::<RunAnswer>(line) {
            signature.push(match &answer.outcome {
                RunOutcome::Errored { message, .. } => shape(message),
                other => outcome_kind(other),
            });
        } else if serde_json::from_str::<Ready>(line).is_ok() {
            signature.push("ready".to_owned());
        } else {
            return Err(format!(
                "the reference adapter wrote a non-message: {line:?}"
            ));
        }
    }
    // Answers, as `tep run` reads them (lossy UTF-8, trimmed), then checked like a real one.
    for line in input.split(|&b| b == b'\n') {
        let text = String::from_utf8_lossy(line);
        let text = text.trim();
        if serde_json::from_str::<Ready>(text).is_ok() {
            signature.push("ready-read".to_owned());
        }
        let Ok(answer) = serde_json::from_str::<RunAnswer>(text) else {
            continue;
        };
        if let RunOutcome::Trace(records) = answer.outcome {
            let options = with_capabilities(
                CheckOptions::new(Revision::Rev2).observed(level(line)),
                capabilities(line),
            );
            signature.push(match check_records(&options, &records) {
                Ok(report) => format!("checked, {} violations", report.violations.len().min(3)),
                Err(e) => shape(&e.message),
            });
        }
    }
    Ok(signature.join(","))
}

/// The outcome's name as the protocol spells it (`trace`, `skipped`, ...).
fn outcome_kind(outcome: &RunOutcome) -> String {
    match serde_json::to_value(outcome) {
        Ok(serde_json::Value::Object(map)) => map.keys().cloned().collect::<Vec<_>>().join(","),
        Ok(other) => other.to_string(),
        Err(e) => e.to_string(),
    }
}

/// A reader that yields `chunk` `times` times, without holding the whole stream.
struct Repeat<'a> {
    chunk: &'a [u8],
    at: usize,
    left: usize,
}

impl Read for Repeat<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.fill_buf()?.len().min(buf.len());
        buf[..n].copy_from_slice(&self.chunk[self.at..self.at + n]);
        self.consume(n);
        Ok(n)
    }
}

impl BufRead for Repeat<'_> {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        if self.left == 0 {
            return Ok(&[]);
        }
        Ok(&self.chunk[self.at..])
    }

    fn consume(&mut self, n: usize) {
        self.at += n;
        if self.at >= self.chunk.len() {
            self.at = 0;
            self.left -= 1;
        }
    }
}

/// The resident memory of this process, in bytes (Linux; `None` elsewhere).
pub fn resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb * 1024)
}

/// Feeds the checker `chunk` (its readable lines, header dropped) repeated until `records`
/// records have been fed, and returns how much resident memory grew between a tenth of the way
/// and the end. `None` when the chunk holds no record, the checker refuses the stream before the
/// end, or memory cannot be measured.
pub fn checker_memory_growth(chunk: &[u8], records: usize) -> Option<(u64, usize)> {
    let body = readable_body(chunk);
    let mut per_chunk = 0;
    let _ = for_each_record(body.as_slice(), |_, _| {
        per_chunk += 1;
        Ok(())
    });
    if per_chunk == 0 {
        return None;
    }
    let stream = Repeat {
        chunk: &body,
        at: 0,
        left: records.div_ceil(per_chunk),
    };
    let mut checker = Checker::new(CheckOptions::new(Revision::Rev2));
    let mut fed = 0;
    let mut early = None;
    let fed_all = for_each_record(stream, |line, record| {
        fed += 1;
        if fed == records / 10 {
            early = resident_bytes();
        }
        checker.feed(line, &record)
    });
    fed_all.ok()?;
    checker.finish().ok()?;
    let late = resident_bytes()?;
    Some((late.saturating_sub(early?), fed))
}

/// The records of `chunk` up to its first line the reader refuses, without a header (a header
/// may only open a trace), each ending in a newline.
fn readable_body(chunk: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    for line in chunk.split(|&b| b == b'\n') {
        let Ok(text) = std::str::from_utf8(line) else {
            break;
        };
        let text = text.trim_end_matches('\r');
        if text.trim().is_empty() {
            continue;
        }
        match parse_record(1, text) {
            Ok(tep_model::trace::TraceRecord::Header(_)) => continue,
            Ok(_) => {
                out.extend_from_slice(text.as_bytes());
                out.push(b'\n');
            }
            Err(_) => break,
        }
    }
    out
}

/// `options` for an implementation with `capabilities` (`None`: every part).
fn with_capabilities(
    options: CheckOptions,
    capabilities: Option<std::collections::BTreeSet<tep_model::trace::Capability>>,
) -> CheckOptions {
    match capabilities {
        Some(caps) => options.with_capabilities(caps),
        None => options.with_every_capability(),
    }
}
