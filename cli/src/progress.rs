//! Live output of `tep run`: a line per scenario as it finishes, a progress bar on stderr when
//! stderr is a terminal, colour on stdout per `--color` and `NO_COLOR`.
//!
//! On a terminal, lines appear in the order scenarios finish. Anywhere else (a CI log, a file, a
//! pipe) they appear in corpus order, each as soon as every scenario before it has finished, so
//! the same run always prints the same bytes (durations aside) whatever `--jobs` is.
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
    failed: usize,
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
            "{spinner} [{elapsed_precise}] [{wide_bar}] {pos}/{len} scenarios {msg}",
        ) {
            bar.set_style(style.progress_chars("=> "));
        }
        if !bar.is_hidden() {
            bar.enable_steady_tick(Duration::from_millis(120));
        }
        Live {
            out,
            bar,
            in_order,
            waiting: BTreeMap::new(),
            next: 0,
            failed: 0,
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

    /// Scenario `index` finished: print its line (now, or once the scenarios before it have
    /// finished) and advance the bar if it ran.
    pub fn finished(
        &mut self,
        index: usize,
        line: Option<String>,
        ran: bool,
        failed: bool,
    ) -> std::io::Result<()> {
        if ran {
            self.bar.inc(1);
        }
        if failed {
            self.failed += 1;
            self.bar.set_message(format!("({} failed)", self.failed));
        }
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
