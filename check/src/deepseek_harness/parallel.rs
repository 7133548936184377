//! [`convert_parallel`]: a session log read on this thread in chunks of whole lines (by the
//! trace reader's [`ChunkReader`], one copy), cut into lines and parsed on worker threads
//! ([`parse`], which needs none of the converter's state), and what they parsed to applied here,
//! in the log's order ([`Converter::apply`]). Parsing is most of the work (the scan and the typed
//! events); attributing events to calls and checking them stay on one thread, in order. This
//! thread parses too, rather than wait: the oldest chunk no worker has taken yet.

use std::io::BufRead;
use std::ops::Range;

use super::{
    ConvertError, Converted, Converter, Ending, LogError, Options, Parsed, Summary, convert, parse,
    without_return,
};
use crate::checker::TraceError;
use crate::trace_io::{ChunkReader, MAX_IN_FLIGHT_BYTES, MAX_LINE_BYTES, Stop};
use crate::work_queue::{Pool, WorkerGone, with_workers};

/// A worker is handed whole lines about this many bytes at a time (or one longer line).
const CHUNK_BYTES: usize = 256 * 1024;

/// Chunks in flight (read, not yet applied) per worker, and at most [`MAX_IN_FLIGHT_BYTES`] in
/// all: work enough to keep every core busy while one of the threads waits for the
/// scheduler. On 2 cores, 2 chunks of 64 KiB a worker left a core idle a quarter of the time
/// (measured with two workers on 10⁵ lines of real logs: 65–69 ms, against 51–58 ms with
/// eight chunks of 256 KiB).
const IN_FLIGHT_PER_WORKER: usize = 8;

/// Whole lines of a log, as read, and what a worker parsed them to.
struct Chunk {
    /// The lines are `bytes[..len]`, each with its newline (but the log's last, maybe).
    bytes: Vec<u8>,
    len: usize,
    /// Where each line lies in `bytes`, without its newline and a carriage return before it.
    lines: Vec<Range<usize>>,
    parsed: Vec<Parsed>,
}

impl Chunk {
    /// Cuts the chunk into lines (on the worker: this thread only copies the bytes) and
    /// parses each.
    fn parse(&mut self, options: &Options) {
        let text = &self.bytes[..self.len];
        let mut lines = Vec::new();
        let mut start = 0;
        for end in memchr::memchr_iter(b'\n', text) {
            lines.push(start..end);
            start = end + 1;
        }
        if start < text.len() {
            lines.push(start..text.len());
        }
        for line in &mut lines {
            line.end = line.start + without_return(&text[line.clone()]).len();
        }
        self.parsed = lines
            .iter()
            .map(|line| parse(options, &text[line.clone()]))
            .collect();
        self.lines = lines;
    }

    /// How its last line ended: only the log's last line may have no newline.
    fn last_ending(&self) -> Ending {
        match self.bytes[..self.len].last() {
            Some(b'\n') => Ending::Newline,
            _ => Ending::EndOfLog,
        }
    }
}

/// How many workers [`convert_parallel`] is worth on this machine for a log of `bytes` (`None`:
/// not known, as on a pipe): one per core but one, since the thread that applies the lines
/// parses too rather than wait (measured on 2 cores, 10⁵ lines of real logs: 45–52 ms with one
/// worker, 49–58 ms with two; with two busy loops beside it, medians of 90–97 ms against
/// 101–131 ms); none where a trace would have none
/// ([`crate::parsing_workers`]: one core, or a short log).
pub fn parsing_workers(bytes: Option<u64>) -> usize {
    crate::trace_io::parsing_workers(bytes).saturating_sub(1)
}

/// [`convert`] with the parsing spread over `workers` threads: the same records with the same
/// lines (and cuts), the same first error and the same summary. With no worker it is
/// [`convert`].
pub fn convert_parallel(
    reader: impl BufRead,
    options: Options,
    workers: usize,
    f: impl FnMut(usize, Converted<'_>) -> Result<(), TraceError>,
) -> Result<Summary, ConvertError> {
    match workers {
        0 => convert(reader, options, f),
        _ => in_chunks(reader, options, workers, CHUNK_BYTES, f),
    }
}

/// The log in chunks of `chunk_bytes`, parsed by `workers` threads and this one. With no
/// worker, this thread parses every chunk itself (tests take that way).
fn in_chunks(
    reader: impl BufRead,
    options: Options,
    workers: usize,
    chunk_bytes: usize,
    f: impl FnMut(usize, Converted<'_>) -> Result<(), TraceError>,
) -> Result<Summary, ConvertError> {
    let converter = Converter::new(options.clone());
    let most = workers.max(1) * IN_FLIGHT_PER_WORKER;
    with_workers(
        vec![(); workers],
        |(), chunk: &mut Chunk| chunk.parse(&options),
        |pool| read_with(pool, &options, most, reader, converter, chunk_bytes, f),
    )
}

/// A worker gone (it panicked, which the scope then raises here): near `line`.
fn worker_gone(line: usize) -> ConvertError {
    ConvertError::Trace(TraceError::new(
        line,
        "a thread parsing the log stopped".to_owned(),
    ))
}

/// Reads the log on this thread, in chunks of whole lines for the pool's workers (copied as
/// read: the workers cut them into lines), and applies what they parsed in the log's order.
fn read_with(
    mut pool: Pool<'_, Chunk>,
    options: &Options,
    most: usize,
    reader: impl BufRead,
    mut converter: Converter,
    chunk_bytes: usize,
    mut f: impl FnMut(usize, Converted<'_>) -> Result<(), TraceError>,
) -> Result<Summary, ConvertError> {
    let mut chunks = ChunkReader::new(reader, MAX_LINE_BYTES);
    let (mut exhausted, mut in_flight_bytes) = (false, 0);
    // The lines applied so far.
    let mut applied = 0;
    // Buffers of applied chunks, filled again: a long log allocates a few.
    let mut spare: Vec<Vec<u8>> = Vec::new();
    loop {
        while !exhausted && pool.pending() < most && in_flight_bytes < MAX_IN_FLIGHT_BYTES {
            let mut bytes = spare.pop().unwrap_or_else(|| vec![0; chunk_bytes]);
            match chunks.next(&mut bytes) {
                Some(len) => {
                    in_flight_bytes += len;
                    let chunk = Chunk {
                        bytes,
                        len,
                        lines: Vec::new(),
                        parsed: Vec::new(),
                    };
                    pool.queue(chunk);
                }
                None => exhausted = true,
            }
        }
        let Some(chunk) = pool.next(|chunk| chunk.parse(options)) else {
            break;
        };
        let chunk = chunk.map_err(|WorkerGone| worker_gone(applied + 1))?;
        in_flight_bytes -= chunk.len;
        let last_ending = chunk.last_ending();
        let Chunk {
            bytes,
            lines,
            parsed,
            ..
        } = chunk;
        let count = lines.len();
        let last = count.saturating_sub(1);
        for (i, (range, parsed)) in lines.into_iter().zip(parsed).enumerate() {
            let line = applied + 1 + i;
            let ending = if i == last {
                last_ending
            } else {
                Ending::Newline
            };
            let text = &bytes[range];
            let made =
                converter.last_line_torn(line, text, ending, |c| c.apply(line, text, parsed))?;
            converter.hand_on(line, made, &mut f)?;
        }
        applied += count;
        // A buffer grown for a long line is not kept: it would hold a line's worth.
        if bytes.len() <= chunk_bytes {
            spare.push(bytes);
        }
    }
    // A read error is reported once every line before it is applied: an earlier line's error
    // comes first, as it does line by line.
    let why = match chunks.stop {
        Some(Stop::TooLong) => format!("line longer than {MAX_LINE_BYTES} bytes"),
        Some(Stop::Unreadable(e)) => format!("cannot read: {e}"),
        None => return converter.end(applied, &mut f),
    };
    Err(LogError::Read {
        line: applied + 1,
        why,
    }
    .into())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::io::{BufReader, Read};

    use tep_model::trace::TraceRecord;

    use super::*;

    /// What each line made with its line (a record, or `None`: a cut), and the summary or the
    /// error, as text.
    type Outcome = (Vec<(usize, Option<TraceRecord>)>, Result<String, String>);

    /// How a test converts a log.
    #[derive(Debug, Clone, Copy)]
    enum Way {
        LineByLine,
        /// In chunks of that many bytes, with that many workers (none: this thread parses
        /// every chunk).
        Chunks(usize, usize),
    }

    /// Converts `text` the `way` given; `stop`: the callback fails at that record.
    fn run(reader: impl BufRead, way: Way, stop: usize) -> Outcome {
        let mut records = Vec::new();
        let options = Options {
            safe: Some(["read_file".to_owned()].into()),
        };
        let mut keep = |line: usize, made: Converted<'_>| {
            records.push((line, made.record().cloned()));
            match records.len() == stop {
                true => Err(TraceError::new(line, "stopped".to_owned())),
                false => Ok(()),
            }
        };
        let summary = match way {
            Way::LineByLine => convert(reader, options, &mut keep),
            Way::Chunks(bytes, workers) => in_chunks(reader, options, workers, bytes, keep),
        };
        let summary = summary.map(|s| format!("{s:?}")).map_err(|e| e.to_string());
        (records, summary)
    }

    /// Every way of cutting `text` into chunks, with no worker to three, gives what reading it
    /// line by line gives.
    fn same_as_line_by_line(name: &str, text: &[u8], stop: usize) {
        let want = run(text, Way::LineByLine, stop);
        for workers in 0..=3 {
            for chunk_bytes in [1, 100, 4096, CHUNK_BYTES] {
                let got = run(text, Way::Chunks(chunk_bytes, workers), stop);
                assert_eq!(got, want, "{name}: {workers} workers, {chunk_bytes} bytes");
            }
        }
    }

    fn logs() -> Vec<(String, Vec<u8>)> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../cli/tests/data/deepseek-harness");
        let mut logs: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
            .map(|p| (p.display().to_string(), std::fs::read(&p).unwrap()))
            .collect();
        logs.sort();
        logs
    }

    #[test]
    fn every_log_converts_in_parallel_as_line_by_line() {
        let logs = logs();
        assert!(logs.len() >= 10, "{}", logs.len());
        for (name, text) in &logs {
            same_as_line_by_line(name, text, 0);
            // The callback's error stops both at the same record.
            same_as_line_by_line(name, text, 7);
        }
    }

    /// The real session log of the harness's own agent loop.
    fn session_log() -> Vec<u8> {
        let (_, session) = logs()
            .into_iter()
            .find(|(n, _)| n.ends_with("rc8-session.jsonl"))
            .unwrap();
        session
    }

    #[test]
    fn errors_blank_lines_and_carriage_returns_come_out_as_line_by_line() {
        let text = String::from_utf8(session_log()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let with = |at: usize, extra: &str| {
            let mut l = lines.clone();
            l.insert(at, extra);
            l.join("\n").into_bytes()
        };
        let cases = [
            ("a line that is no event, midway", with(40, "not json")),
            (
                "a key named twice",
                with(
                    20,
                    r#"{"type":"turn/start","seq":1,"seq":2,"time":1,"data":{}}"#,
                ),
            ),
            ("blank lines", with(30, "   ")),
            ("a second header", with(12, lines[0])),
            ("carriage returns", text.replace('\n', "\r\n").into_bytes()),
            ("no header", lines[1..].join("\n").into_bytes()),
            ("empty", Vec::new()),
        ];
        for (name, text) in &cases {
            same_as_line_by_line(name, text, 0);
        }
    }

    /// One worker fewer than a trace gets, since this thread parses too; none where a trace
    /// gets none.
    #[test]
    fn a_log_gets_a_worker_per_core_but_one() {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        assert_eq!(parsing_workers(Some(0)), 0);
        for bytes in [None, Some(u64::MAX)] {
            let trace = crate::parsing_workers(bytes);
            assert_eq!(
                parsing_workers(bytes),
                trace.saturating_sub(1),
                "{cores} cores"
            );
            assert_eq!(parsing_workers(bytes) > 0, cores > 1, "{cores} cores");
        }
    }

    /// A reader that fails after `ok` bytes of `text`.
    struct Failing {
        text: Vec<u8>,
        at: usize,
        ok: usize,
    }

    impl Read for Failing {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            if self.at >= self.ok {
                return Err(std::io::Error::other("disk gone"));
            }
            let n = out.len().min(self.ok - self.at).min(7);
            out[..n].copy_from_slice(&self.text[self.at..self.at + n]);
            self.at += n;
            Ok(n)
        }
    }

    /// A read error is reported after the lines before it, so that an earlier line's own
    /// error comes first, as line by line.
    #[test]
    fn a_read_error_comes_after_the_lines_before_it() {
        let session = session_log();
        let mut broken = session.clone();
        let tenth = broken
            .iter()
            .enumerate()
            .filter(|(_, b)| **b == b'\n')
            .nth(9);
        broken.splice(tenth.unwrap().0 + 1..tenth.unwrap().0 + 1, *b"not json\n");
        for (text, ok) in [(&session, 5_000), (&broken, 9_000), (&session, 0)] {
            let reader = |text: &Vec<u8>| {
                BufReader::with_capacity(
                    16,
                    Failing {
                        text: text.clone(),
                        at: 0,
                        ok,
                    },
                )
            };
            let want = run(reader(text), Way::LineByLine, 0);
            assert!(want.1.is_err(), "{want:?}");
            for (workers, chunk_bytes) in [(0, 100), (1, 1), (2, 300), (3, CHUNK_BYTES)] {
                let got = run(reader(text), Way::Chunks(chunk_bytes, workers), 0);
                assert_eq!(got, want, "{ok}");
            }
        }
    }
}
