//! Live output of `tep run`: a line per scenario as it finishes, a progress bar on stderr when
//! stderr is a terminal, colour on stdout per `--color` and `NO_COLOR`.
//!
//! On a terminal, lines appear in the order scenarios finish. Anywhere else (a CI log, a file, a
//! pipe) they appear in corpus order, each as soon as every scenario before it has finished, so
//! the same run always prints the same bytes (durations aside) whatever `--jobs` is.
//!
//! The bar says how the run is going, as nextest's does: `12/57: 2 running, 9 passed, 1 failed`,
//! then the running scenarios' ids (cut at the terminal's width).
//!
//! Every write to stdout goes through [`Live::write`], which lets no control character through
//! but newlines, tabs and colours (see `tep_conformance::terminal`). A reader that goes away (`tep run | head`)
//! ends the output quietly: the run goes on, its files are written and its exit code still says
//! what it found. Any other I/O error is returned.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Stdout, Write};
use std::time::Duration;

use anstream::{AutoStream, ColorChoice};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use tep_conformance::terminal::{escape_controls, escape_except_sgr};

/// The live output of one run.
#[derive(Debug)]
pub struct Live {
    out: AutoStream<Stdout>,
    bar: ProgressBar,
    /// Lines wait for the scenarios before them (stdout is not a terminal).
    in_order: bool,
    /// Lines waiting for an earlier scenario, by index.
    waiting: BTreeMap<usize, String>,
    /// The index of the next line to print in order.
    next: usize,
    /// The scenarios an implementation is running, by index.
    running: BTreeMap<usize, String>,
    passed: usize,
    failed: usize,
    skipped: usize,
    /// Stdout's reader went away: the rest of the output is dropped.
    closed: bool,
}

impl Live {
    /// `runnable`: how many scenarios the progress bar counts (those sent to the implementation).
    pub fn new(runnable: usize, color: ColorChoice) -> Self {
        let stdout = std::io::stdout();
        let in_order = !stdout.is_terminal();
        let out = AutoStream::new(stdout, color);
        let target = if std::io::stderr().is_terminal() {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        };
        let bar = ProgressBar::with_draw_target(Some(runnable as u64), target);
        if let Ok(style) = ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] [{bar:24}] {pos}/{len}: {wide_msg}",
        ) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_message(tally(&[], 0, 0, 0));
        if !bar.is_hidden() {
            bar.enable_steady_tick(Duration::from_millis(120));
        }
        Live {
            out,
            bar,
            in_order,
            waiting: BTreeMap::new(),
            next: 0,
            running: BTreeMap::new(),
            passed: 0,
            failed: 0,
            skipped: 0,
            closed: false,
        }
    }

    /// Writes `text` to stdout, above the progress bar.
    pub fn write(&mut self, text: &str) -> std::io::Result<()> {
        if self.closed {
            return Ok(());
        }
        // The last line of defence: only the colours the report builders wrote get through.
        let text = escape_except_sgr(text);
        let out = &mut self.out;
        let written = self.bar.suspend(|| {
            out.write_all(text.as_bytes())?;
            out.flush()
        });
        match written {
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
                self.closed = true;
                Ok(())
            }
            Err(e) => Err(std::io::Error::new(
                e.kind(),
                format!("cannot write to standard output: {e}"),
            )),
            Ok(()) => Ok(()),
        }
    }

    /// Scenario `index` (`id`) was sent to an implementation.
    pub fn started(&mut self, index: usize, id: &str) {
        self.running.insert(index, id.to_owned());
        self.show_tally();
    }

    /// Scenario `index` finished: print its line (now, or once the scenarios before it have
    /// finished) and advance the bar if it ran.
    pub fn finished(
        &mut self,
        index: usize,
        line: Option<String>,
        ran: bool,
        outcome: Tallied,
    ) -> std::io::Result<()> {
        if ran {
            self.bar.inc(1);
        }
        self.running.remove(&index);
        match outcome {
            Tallied::Passed => self.passed += 1,
            Tallied::Failed => self.failed += 1,
            Tallied::Skipped => self.skipped += 1,
        }
        self.show_tally();
        let Some(line) = line else {
            return Ok(());
        };
        if !self.in_order {
            return self.write(&line);
        }
        self.waiting.insert(index, line);
        let mut ready = String::new();
        while let Some(line) = self.waiting.remove(&self.next) {
            ready.push_str(&line);
            self.next += 1;
        }
        if ready.is_empty() {
            Ok(())
        } else {
            self.write(&ready)
        }
    }

    fn show_tally(&self) {
        let running: Vec<&str> = self.running.values().map(String::as_str).collect();
        self.bar
            .set_message(tally(&running, self.passed, self.failed, self.skipped));
    }

    /// The run is over: print the lines still waiting for scenarios that did not run.
    pub fn flush_waiting(&mut self) -> std::io::Result<()> {
        let lines: String = std::mem::take(&mut self.waiting).into_values().collect();
        if lines.is_empty() {
            Ok(())
        } else {
            self.write(&lines)
        }
    }

    /// Tells the person at the terminal what Ctrl-C did (stderr; errors there are ignored).
    pub fn notice(&self, text: &str) {
        self.bar.suspend(|| {
            let _ = writeln!(std::io::stderr(), "{}", escape_controls(text));
        });
    }

    /// Removes the progress bar.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

impl Drop for Live {
    /// An error ends the run early: leave no bar behind on the terminal.
    fn drop(&mut self) {
        self.bar.finish_and_clear();
    }
}

/// How a finished scenario counts on the bar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tallied {
    /// Passed, warned only, or failed as the baseline expects: not a failure of the run.
    Passed,
    /// Fails the run.
    Failed,
    Skipped,
}

/// The bar's message: `N running, N passed, N failed` (and skipped, when any), then the ids of
/// the running scenarios.
fn tally(running: &[&str], passed: usize, failed: usize, skipped: usize) -> String {
    let mut text = format!(
        "{} running, {passed} passed, {failed} failed",
        running.len()
    );
    if skipped > 0 {
        text.push_str(&format!(", {skipped} skipped"));
    }
    if !running.is_empty() {
        text.push_str(": ");
        text.push_str(&running.join(", "));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tally_names_the_running_scenarios() {
        assert_eq!(tally(&[], 0, 0, 0), "0 running, 0 passed, 0 failed");
        assert_eq!(
            tally(&["pre-deny-skips-body", "allow-runs-body"], 9, 1, 2),
            "2 running, 9 passed, 1 failed, 2 skipped: pre-deny-skips-body, allow-runs-body"
        );
    }

    #[test]
    fn started_and_finished_scenarios_move_between_running_and_the_counts() {
        let mut live = Live::new(3, ColorChoice::Never);
        live.started(0, "a");
        live.started(2, "c");
        assert_eq!(live.bar.message(), "2 running, 0 passed, 0 failed: a, c");
        live.finished(2, None, true, Tallied::Failed).unwrap();
        assert_eq!(live.bar.message(), "1 running, 0 passed, 1 failed: a");
        live.finished(0, None, true, Tallied::Passed).unwrap();
        live.finished(1, None, false, Tallied::Skipped).unwrap();
        assert_eq!(
            live.bar.message(),
            "0 running, 1 passed, 1 failed, 1 skipped"
        );
    }
}
