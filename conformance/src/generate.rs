//! Synthetic traces for benchmarks and load tests, each one a trace the checker accepts.
//!
//! - [`Shape::CorpusMix`]: every scenario of the corpus that runs in the revision, run on the
//!   reference, one batch after the other: the mix of records real runs produce.
//! - [`Shape::WideBatch`]: one batch of `n` concurrency-safe calls whose bodies all run at once.
//! - [`Shape::LongProgram`]: one `run_code` call whose program issues `n` sub-calls in turn.
//! - [`Shape::ManyContexts`]: a wide batch whose every call announces contexts, all injected
//!   after the batch settles.
//!
//! The built shapes are `tep_check::shapes`' (feature `testing`, which this module's feature
//! `synthetic` turns on): rev2 traces at level `full` in the reference's own record order (a
//! call's prepare stages, its dispatch, then the commits in model order). Repeating a
//! shape ([`write_jsonl`]) renumbers the session seqs so the log stays increasing; call ids repeat
//! from one batch to the next, as they may in a real session. Nothing here is timed: the
//! benches time what these traces cost, and the tests count work on them.

use std::io::{self, Write};

use tep_check::shapes;
use tep_model::graph::Revision;
use tep_model::trace::{ObservationLevel, TraceHeader, TraceRecord};

use crate::scenario::corpus;
use crate::scripted::run_reference;

/// A kind of synthetic trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// The corpus scenarios of the revision, run on the reference, one batch each.
    CorpusMix(Revision),
    /// One batch of this many concurrency-safe calls, every body running at once.
    WideBatch(usize),
    /// One `run_code` call whose program issues this many sub-calls, one after the other.
    LongProgram(usize),
    /// One batch of `calls` concurrency-safe calls, each deferring `contexts` contexts.
    ManyContexts { calls: usize, contexts: usize },
}

impl Shape {
    /// The revision the trace is checked against.
    pub fn revision(self) -> Revision {
        match self {
            Shape::CorpusMix(revision) => revision,
            _ => Revision::Rev2,
        }
    }

    /// A short name for bench ids and file names (`wide-batch-1000`).
    pub fn name(self) -> String {
        match self {
            Shape::CorpusMix(revision) => format!("corpus-mix-{revision}"),
            Shape::WideBatch(n) => format!("wide-batch-{n}"),
            Shape::LongProgram(n) => format!("long-program-{n}"),
            Shape::ManyContexts { calls, contexts } => {
                format!("many-contexts-{calls}x{contexts}")
            }
        }
    }
}

/// Why a trace could not be generated.
#[derive(Debug, thiserror::Error)]
pub enum GenerateError {
    /// A corpus scenario did not run on the reference.
    #[error("the corpus does not run on the reference: {0}")]
    Corpus(String),
    #[error("cannot write the trace: {0}")]
    Io(#[from] io::Error),
}

/// The records of one copy of `shape`, without a header.
pub fn records(shape: Shape) -> Result<Vec<TraceRecord>, GenerateError> {
    let mut out = Vec::new();
    Generator::new(shape)?.emit(&mut |r| {
        out.push(r);
        Ok(())
    })?;
    Ok(out)
}

/// `times` copies of `shape` as JSON Lines, after a header line naming its revision. Returns
/// how many records (header included) were written. Streams: one copy of a built shape is never
/// held in memory, so a 10⁷-record trace costs what one record costs.
pub fn write_jsonl(shape: Shape, times: usize, out: impl Write) -> Result<u64, GenerateError> {
    let mut out = io::BufWriter::with_capacity(1 << 16, out);
    let mut generator = Generator::new(shape)?;
    let mut written = 0u64;
    let mut write = |record: TraceRecord| -> Result<(), GenerateError> {
        serde_json::to_writer(&mut out, &record).map_err(io::Error::from)?;
        out.write_all(b"\n")?;
        written += 1;
        Ok(())
    };
    write(TraceRecord::Header(TraceHeader {
        spec: shape.revision(),
        implementation: Some("tep generate".to_owned()),
        capabilities: None,
        observation: Some(ObservationLevel::Full),
    }))?;
    for _ in 0..times {
        generator.emit(&mut write)?;
    }
    out.flush()?;
    Ok(written)
}

/// [`write_jsonl`] into a string.
pub fn jsonl(shape: Shape, times: usize) -> Result<String, GenerateError> {
    let mut bytes = Vec::new();
    write_jsonl(shape, times, &mut bytes)?;
    // serde_json writes UTF-8 only.
    String::from_utf8(bytes).map_err(|e| GenerateError::Io(io::Error::other(e)))
}

type Sink<'a> = dyn FnMut(TraceRecord) -> Result<(), GenerateError> + 'a;

/// Emits copies of a shape, keeping the session log's seq increasing from one to the next.
struct Generator {
    shape: Shape,
    /// The corpus runs, for [`Shape::CorpusMix`].
    corpus: Vec<TraceRecord>,
    /// The last seq emitted.
    seq: u64,
}

impl Generator {
    fn new(shape: Shape) -> Result<Self, GenerateError> {
        let corpus = match shape {
            Shape::CorpusMix(revision) => corpus_runs(revision)?,
            _ => Vec::new(),
        };
        Ok(Generator {
            shape,
            corpus,
            seq: 0,
        })
    }

    fn emit(&mut self, sink: &mut Sink<'_>) -> Result<(), GenerateError> {
        match self.shape {
            Shape::CorpusMix(_) => {
                let base = self.seq;
                for record in &self.corpus {
                    let mut record = record.clone();
                    if let TraceRecord::Event(e) = &mut record {
                        e.event.seq += base;
                        if let Some(sources) = e.event.source_event_seqs.as_mut() {
                            sources.iter_mut().for_each(|s| *s += base);
                        }
                        self.seq = self.seq.max(e.event.seq);
                    }
                    sink(record)?;
                }
                Ok(())
            }
            Shape::WideBatch(n) => shapes::emit(shapes::Shape::WideBatch(n), &mut self.seq, sink),
            Shape::ManyContexts { calls, contexts } => shapes::emit(
                shapes::Shape::ManyContexts { calls, contexts },
                &mut self.seq,
                sink,
            ),
            Shape::LongProgram(n) => {
                shapes::emit(shapes::Shape::LongProgram(n), &mut self.seq, sink)
            }
        }
    }
}

/// Every scenario of the corpus that runs in `revision`, run on the reference, headers dropped.
fn corpus_runs(revision: Revision) -> Result<Vec<TraceRecord>, GenerateError> {
    let scenarios = corpus().map_err(|e| GenerateError::Corpus(e.to_string()))?;
    let mut out = Vec::new();
    let mut last_seq = 0;
    for scenario in scenarios.iter().filter(|s| s.revisions.contains(&revision)) {
        let base = last_seq;
        for mut record in run_reference(scenario, revision, &[]).map_err(GenerateError::Corpus)? {
            match &mut record {
                TraceRecord::Header(_) => continue,
                TraceRecord::Event(e) => {
                    e.event.seq += base;
                    if let Some(sources) = e.event.source_event_seqs.as_mut() {
                        sources.iter_mut().for_each(|s| *s += base);
                    }
                    last_seq = e.event.seq;
                }
                _ => {}
            }
            out.push(record);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tep_check::read_records;
    use tep_check::{CheckOptions, check_records};

    fn clean(shape: Shape) {
        let records = records(shape).unwrap_or_else(|e| panic!("{e}"));
        let report = check_records(&CheckOptions::new(shape.revision()), &records)
            .unwrap_or_else(|e| panic!("{}: {e}", shape.name()));
        assert!(
            report.violations.is_empty(),
            "{}: {:?}",
            shape.name(),
            report.violations.first()
        );
        assert!(report.batches >= 1);
    }

    #[test]
    fn every_built_shape_is_a_clean_trace() {
        clean(Shape::WideBatch(1));
        clean(Shape::WideBatch(7));
        clean(Shape::LongProgram(1));
        clean(Shape::LongProgram(7));
        clean(Shape::ManyContexts {
            calls: 5,
            contexts: 3,
        });
    }

    #[test]
    fn the_corpus_mix_is_clean_in_both_revisions() {
        for revision in Revision::ALL {
            clean(Shape::CorpusMix(revision));
        }
    }

    #[test]
    fn repeated_copies_keep_the_log_increasing_and_read_back() {
        let shape = Shape::ManyContexts {
            calls: 3,
            contexts: 2,
        };
        let text = jsonl(shape, 4).unwrap_or_else(|e| panic!("{e}"));
        let records = read_records(text.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
        let one = super::records(shape).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(records.len(), 1 + 4 * one.len());
        let report = check_records(&CheckOptions::new(Revision::Rev2), &records)
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(
            report.violations.is_empty(),
            "{:?}",
            report.violations.first()
        );
        assert_eq!(report.batches, 4);
    }
}
