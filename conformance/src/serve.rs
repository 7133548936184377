//! `tep reference-adapter`: the built-in reference behind the adapter protocol.
//!
//! It is the worked example of `docs/adapter-protocol.md` made executable: the end-to-end tests
//! drive it through the same subprocess machinery as any other adapter, and `--mutant` turns it
//! into a deliberately broken implementation the suite must catch.

use std::io::{BufRead, Write};

use tep_reference::mutant::Mutant;

use crate::protocol::{Request, RunAnswer, RunOutcome};
use crate::runner::{Answer, BuiltinReference, Implementation};
use crate::scenario::versions;

/// The longest request line served; a longer one is skipped like any other bad request.
pub const MAX_REQUEST_BYTES: usize = 16 * 1024 * 1024;

/// Serves requests from `input` until `stop` or end of input. A line that is not a request (not
/// UTF-8, too long, not JSON, not a known command) has no seq to answer with: it is reported on
/// stderr and skipped. A request whose scenario is not valid (crate::scenario::limits included) is answered
/// `errored`. Only an I/O error on `input` or `output` ends the loop early.
pub fn serve_reference(
    mutants: Vec<Mutant>,
    input: impl BufRead,
    output: impl Write,
) -> std::io::Result<()> {
    serve_reference_with_notes(mutants, input, output, std::io::stderr())
}

/// [`serve_reference`], with the notes about skipped lines written to `notes` (best effort).
pub fn serve_reference_with_notes(
    mutants: Vec<Mutant>,
    input: impl BufRead,
    output: impl Write,
    notes: impl Write,
) -> std::io::Result<()> {
    serve_builtin(BuiltinReference::new(mutants), input, output, notes)
}

/// [`serve_reference_with_notes`] for a given reference (e.g. one declaring an older protocol,
/// [`BuiltinReference::with_protocol`]). A scenario using a construct newer than the protocol it
/// declares is answered `errored`: a runner must not send one.
pub fn serve_builtin(
    mut reference: BuiltinReference,
    mut input: impl BufRead,
    mut output: impl Write,
    mut notes: impl Write,
) -> std::io::Result<()> {
    let declared = reference.ready().protocol;
    let mut line = Vec::new();
    loop {
        let request = match read_request(&mut input, &mut line)? {
            None => return Ok(()),
            Some(Ok(request)) => request,
            Some(Err((Some(seq), problem))) => {
                // A request whose seq can be read is answered: the runner must not wait for
                // an answer that never comes.
                let answer = RunAnswer {
                    seq,
                    outcome: RunOutcome::Errored {
                        message: format!("the request is not valid: {problem}"),
                        context: None,
                    },
                };
                let reply = serde_json::to_string(&answer).map_err(std::io::Error::other)?;
                writeln!(output, "{reply}")?;
                output.flush()?;
                continue;
            }
            Some(Err((None, problem))) => {
                // The note is best effort: a closed stderr must not stop the server.
                let _ = writeln!(
                    notes,
                    "tep reference-adapter: ignoring a request that is not valid: {problem}"
                );
                continue;
            }
        };
        let reply = match request {
            Request::Start { .. } => serde_json::to_string(reference.ready()),
            Request::Run {
                seq,
                spec,
                scenario,
            } => {
                let newer = versions::not_applicable(&scenario, declared);
                let outcome = match scenario.validate() {
                    Err(e) => RunOutcome::Errored {
                        message: e.to_string(),
                        context: None,
                    },
                    Ok(()) if newer.is_some() => RunOutcome::Errored {
                        message: format!(
                            "tep sent a construct newer than the declared protocol {declared}"
                        ),
                        context: newer,
                    },
                    Ok(()) => match reference.run(seq, spec, &scenario) {
                        Answer::Ran(records) => RunOutcome::Trace(records),
                        Answer::Escaped { message, records } => RunOutcome::Escaped {
                            message,
                            trace: records,
                        },
                        Answer::Skipped(reason) => RunOutcome::Skipped { reason },
                        Answer::Errored { message, .. } => RunOutcome::Errored {
                            message,
                            context: None,
                        },
                    },
                };
                serde_json::to_string(&RunAnswer { seq, outcome })
            }
            Request::Stop => return Ok(()),
        };
        let reply = reply.map_err(std::io::Error::other)?;
        writeln!(output, "{reply}")?;
        output.flush()?;
    }
}

/// A line that is not a request: its top-level `seq` if one could be read, and the problem.
type BadRequest = (Option<u64>, String);

/// Reads the next non-blank line and parses it: `None` at end of input, `Some(Err)` for a line
/// that is not a request, with its top-level `seq` when that can still be read.
fn read_request(
    input: &mut impl BufRead,
    line: &mut Vec<u8>,
) -> std::io::Result<Option<Result<Request, BadRequest>>> {
    loop {
        line.clear();
        let mut too_long = false;
        // Read up to the newline; past the limit keep consuming but stop storing.
        let ended = loop {
            let available = input.fill_buf()?;
            if available.is_empty() {
                break true;
            }
            let (used, done) = match available.iter().position(|&b| b == b'\n') {
                Some(i) => (i + 1, true),
                None => (available.len(), false),
            };
            if line.len() + used > MAX_REQUEST_BYTES {
                too_long = true;
                line.clear();
            } else if !too_long {
                line.extend_from_slice(&available[..used]);
            }
            input.consume(used);
            if done {
                break false;
            }
        };
        if too_long {
            return Ok(Some(Err((
                None,
                format!("the line is longer than {MAX_REQUEST_BYTES} bytes"),
            ))));
        }
        if ended && line.is_empty() {
            return Ok(None);
        }
        let text = match std::str::from_utf8(line) {
            Ok(text) => text,
            Err(e) => {
                return Ok(Some(Err((
                    None,
                    format!("not valid UTF-8 (at byte {})", e.valid_up_to()),
                ))));
            }
        };
        if text.trim().is_empty() {
            if ended {
                return Ok(None);
            }
            continue;
        }
        return Ok(Some(
            serde_json::from_str(text).map_err(|e| (top_level_seq(text), e.to_string())),
        ));
    }
}

/// The unsigned integer `seq` of the object `text` holds at its top level, found by scanning
/// (no recursion, so a line too deep for serde_json still gives its seq). `None` when there is
/// no such member or `text` is not an object.
fn top_level_seq(text: &str) -> Option<u64> {
    let bytes = text.trim_start().as_bytes();
    if bytes.first() != Some(&b'{') {
        return None;
    }
    let (mut depth, mut i) = (0usize, 0usize);
    // Whether the next string at depth 1 is a key.
    let mut key_next = false;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                let start = i + 1;
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                if depth == 1 && key_next && bytes.get(start..i) == Some(b"seq".as_slice()) {
                    let rest = std::str::from_utf8(bytes.get(i + 1..)?).ok()?.trim_start();
                    let rest = rest.strip_prefix(':')?.trim_start();
                    let end = rest
                        .find(|c: char| !c.is_ascii_digit())
                        .unwrap_or(rest.len());
                    return rest[..end].parse().ok();
                }
                key_next = false;
            }
            b'{' | b'[' => {
                depth += 1;
                key_next = depth == 1;
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            b',' => key_next = depth == 1,
            _ => {}
        }
        i += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Ready;

    fn scenario_json(id: &str, edit: impl FnOnce(&mut serde_json::Value)) -> serde_json::Value {
        let (_, text) = crate::scenario::corpus_files()
            .iter()
            .find(|(file, _)| file.trim_end_matches(".json") == id)
            .unwrap_or_else(|| panic!("no scenario {id}"));
        let mut value: serde_json::Value =
            serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}"));
        edit(&mut value);
        value
    }

    fn run_line(seq: u64, scenario: serde_json::Value) -> Vec<u8> {
        let request =
            serde_json::json!({"cmd": "run", "seq": seq, "spec": "rev2", "scenario": scenario});
        format!("{request}\n").into_bytes()
    }

    /// Serves `input` and returns the answers (one JSON value per line).
    fn serve(input: &[u8]) -> Vec<serde_json::Value> {
        let mut output = Vec::new();
        serve_reference_with_notes(vec![], input, &mut output, std::io::sink())
            .unwrap_or_else(|e| panic!("{e}"));
        String::from_utf8_lossy(&output)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect()
    }

    #[test]
    fn a_non_utf8_line_is_skipped_like_any_bad_request() {
        let mut input =
            b"{\"cmd\":\"start\",\"protocol\":1}\n\xff\xfe\n{\"cmd\":\"wat\"}\n".to_vec();
        input.extend(run_line(7, scenario_json("allow-runs-body", |_| {})));
        let answers = serve(&input);
        assert_eq!(answers.len(), 2, "{answers:?}");
        let ready: Ready =
            serde_json::from_value(answers[0].clone()).unwrap_or_else(|e| panic!("{e}"));
        assert!(ready.ready);
        assert_eq!(answers[1]["seq"], 7);
        assert!(answers[1]["trace"].is_array(), "{}", answers[1]);
    }

    #[test]
    fn an_over_long_line_is_skipped_and_serving_goes_on() {
        let mut input = vec![b'x'; MAX_REQUEST_BYTES + 10];
        input.push(b'\n');
        input.extend(run_line(2, scenario_json("allow-runs-body", |_| {})));
        let answers = serve(&input);
        assert_eq!(answers.len(), 1);
        assert_eq!(answers[0]["seq"], 2);
    }

    #[test]
    fn a_request_too_deep_to_read_is_answered_errored_not_dropped() {
        // N10: 122 deep passed the validator but its request was dropped (serde's 128).
        let deep = crate::scenario::limits::tests::nested_return(122);
        let mut input = run_line(5, deep);
        input.extend(run_line(6, scenario_json("allow-runs-body", |_| {})));
        let answers = serve(&input);
        assert_eq!(answers.len(), 2, "{answers:?}");
        assert_eq!(answers[0]["seq"], 5);
        let message = answers[0]["errored"]["message"]
            .as_str()
            .unwrap_or_default();
        assert!(message.contains("recursion limit"), "{}", answers[0]);
        assert_eq!(answers[1]["seq"], 6);
    }

    #[test]
    fn every_scenario_the_validator_accepts_is_served() {
        use crate::scenario::limits::MAX_NESTING;
        let deepest = crate::scenario::limits::tests::nested_return(MAX_NESTING - 5);
        assert!(crate::scenario::Scenario::from_json(&deepest.to_string()).is_ok());
        let answers = serve(&run_line(3, deepest));
        assert_eq!(answers.len(), 1);
        assert!(answers[0]["trace"].is_array(), "{}", answers[0]);
    }

    #[test]
    fn the_seq_of_an_unreadable_request_is_found_by_scanning() {
        assert_eq!(
            top_level_seq(r#"{"cmd":"run","seq":42,"x":[[["seq"]]]}"#),
            Some(42)
        );
        assert_eq!(
            top_level_seq(r#"{"a":{"seq":1},"b":"\"seq\":2","seq" : 3}"#),
            Some(3)
        );
        assert_eq!(top_level_seq(r#"{"a":{"seq":1}}"#), None);
        assert_eq!(top_level_seq("[1]"), None);
    }

    #[test]
    fn a_scenario_over_the_limits_is_answered_errored_naming_the_field() {
        // Each of these once ran away: an add overflow, and an endless zero-delay retry loop.
        let observer = scenario_json("tools-result-is-synchronous", |v| {
            v["observers"][0]["asyncMs"] = u64::MAX.into();
        });
        let retry = scenario_json("retry-dispatches-again", |v| {
            v["wrappers"][1]["attempts"] = u32::MAX.into();
            v["calls"][0]["body"] = serde_json::json!([{"throw": "always"}]);
        });
        let mut input = run_line(1, observer);
        input.extend(run_line(2, retry));
        let answers = serve(&input);
        assert_eq!(answers.len(), 2);
        let message = |a: &serde_json::Value| {
            a["errored"]["message"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        };
        assert!(
            message(&answers[0]).contains("`observers[0].asyncMs`"),
            "{}",
            answers[0]
        );
        assert!(
            message(&answers[1]).contains("`wrappers[1].attempts` is 4294967295"),
            "{}",
            answers[1]
        );
    }
}
