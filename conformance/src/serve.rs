//! `tep reference-adapter`: the built-in reference behind the adapter protocol.
//!
//! It is the worked example of `docs/adapter-protocol.md` made executable: the end-to-end tests
//! drive it through the same subprocess machinery as any other adapter, and `--mutant` turns it
//! into a deliberately broken implementation the suite must catch.

use std::io::{BufRead, Write};

use tep_reference::mutant::Mutant;

use crate::protocol::{Request, RunAnswer, RunOutcome};
use crate::runner::{Answer, BuiltinReference, Implementation};

/// Serves requests from `input` until `stop` or end of input.
pub fn serve_reference(
    mutants: Vec<Mutant>,
    input: impl BufRead,
    mut output: impl Write,
) -> std::io::Result<()> {
    let mut reference = BuiltinReference::new(mutants);
    for line in input.lines() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let request: Request = match serde_json::from_str(&line) {
            Ok(r) => r,
            Err(e) => {
                // No seq to answer with: say so on stderr and keep serving.
                eprintln!("tep reference-adapter: ignoring a request that is not valid: {e}");
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
                let outcome = match reference.run(seq, spec, &scenario) {
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
                };
                serde_json::to_string(&RunAnswer { seq, outcome })
            }
            Request::Stop => return Ok(()),
        };
        let reply = reply.map_err(std::io::Error::other)?;
        writeln!(output, "{reply}")?;
        output.flush()?;
    }
    Ok(())
}
