//! The streaming front door: a check whose options come from the trace's own header, decided
//! when the first record arrives, so a caller feeds records as it reads them (from a file, a
//! pipe, or a harness's session log) and never builds the options itself.

use std::io::BufRead;

use tep_model::trace::{TraceHeader, TraceRecord};

use crate::checker::{CheckReport, Checker, TraceError};
use crate::facts::CheckOptions;
use crate::trace_io::for_each_record;

/// How the options follow from a trace's header (`None`: the trace has none).
pub type OptionsFor = Box<dyn Fn(Option<&TraceHeader>) -> CheckOptions + Send>;

/// A check fed record by record, whose options come from the trace's first record: its header
/// when it has one. [`crate::check`] is this over a reader.
pub struct TraceCheck {
    options_for: OptionsFor,
    keep_steps: bool,
    header: Option<TraceHeader>,
    checker: Option<Checker>,
}

impl std::fmt::Debug for TraceCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TraceCheck")
            .field("keep_steps", &self.keep_steps)
            .field("header", &self.header)
            .field("checker", &self.checker)
            .finish_non_exhaustive()
    }
}

impl Default for TraceCheck {
    fn default() -> Self {
        TraceCheck::new(Box::new(CheckOptions::from_header))
    }
}

impl TraceCheck {
    /// A check whose options `options_for` derives from the header (for example
    /// [`CheckOptions::from_header`], then the caller's overrides).
    pub fn new(options_for: OptionsFor) -> Self {
        TraceCheck {
            options_for,
            keep_steps: false,
            header: None,
            checker: None,
        }
    }

    /// Keeps every record's step ([`CheckReport::steps`]), for a report that draws them.
    pub fn keep_steps(mut self) -> Self {
        self.keep_steps = true;
        self
    }

    /// Checks one record (`line` is 1-based).
    pub fn feed(&mut self, line: usize, record: &TraceRecord) -> Result<(), TraceError> {
        if self.checker.is_none() {
            let header = match record {
                TraceRecord::Header(h) => Some(h),
                _ => None,
            };
            self.header = header.cloned();
            let checker = Checker::new((self.options_for)(header));
            self.checker = Some(if self.keep_steps {
                checker.keep_steps()
            } else {
                checker
            });
        }
        match self.checker.as_mut() {
            Some(checker) => checker.feed(line, record),
            None => Ok(()),
        }
    }

    /// The trace's header, once the first record was fed (`None` before, or without one).
    pub fn header(&self) -> Option<&TraceHeader> {
        self.header.as_ref()
    }

    /// The options the trace is checked with (for an empty trace, those of no header).
    pub fn options(&self) -> CheckOptions {
        match &self.checker {
            Some(c) => c.options().clone(),
            None => (self.options_for)(None),
        }
    }

    /// The records of the open batch stop here (a log cut short, a turn a crash interrupted):
    /// see [`Checker::cut_short`].
    pub fn cut_short(&mut self) {
        if let Some(checker) = self.checker.as_mut() {
            checker.cut_short();
        }
    }

    /// Closes the last batch: the options used and the report (an empty trace checked
    /// nothing: [`crate::Verdict::NothingChecked`]).
    pub fn finish(self) -> Result<(CheckOptions, CheckReport), TraceError> {
        match self.checker {
            Some(c) => {
                let options = c.options().clone();
                Ok((options, c.finish()?))
            }
            None => Ok(((self.options_for)(None), CheckReport::default())),
        }
    }

    /// Reads and checks a whole trace.
    pub fn read(mut self, reader: impl BufRead) -> Result<(CheckOptions, CheckReport), TraceError> {
        for_each_record(reader, |line, record| self.feed(line, &record))?;
        self.finish()
    }
}
