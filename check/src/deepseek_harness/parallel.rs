//! [`convert_parallel`]: a session log read on this thread, its lines parsed on worker threads
//! ([`parse`], which needs none of the converter's state), and what they parsed to applied here,
//! in the log's order ([`Converter::apply`]). Parsing is most of the work (the scan and the typed
//! events); attributing events to calls and checking them stay on one thread, in order.

use std::io::BufRead;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};

use super::{
    ConvertError, Converted, Converter, Ending, LogError, Options, Parsed, Summary, convert,
    next_line, parse,
};
use crate::checker::TraceError;

/// A worker is handed lines about this many bytes at a time (or one longer line).
const CHUNK_BYTES: usize = 64 * 1024;

/// Chunks handed to each worker and not yet applied: enough that no worker waits while this
/// thread applies another's, few enough that memory stays bounded (two chunks a worker, and
/// what they parsed to).
const IN_FLIGHT_PER_WORKER: usize = 2;

/// Lines of a log, one after another without their newlines, and what a worker parsed them to.
struct Chunk {
    /// The number of its first line.
    first: usize,
    bytes: Vec<u8>,
    /// Where each line ends in `bytes`.
    ends: Vec<usize>,
    parsed: Vec<Parsed>,
    /// How its last line ended (the log's last line may have no newline).
    last_ending: Ending,
}

impl Chunk {
    fn new(first: usize) -> Self {
        Chunk {
            first,
            bytes: Vec::new(),
            ends: Vec::new(),
            parsed: Vec::new(),
            last_ending: Ending::Newline,
        }
    }

    /// Reads line `line` of the log onto the chunk: `false` at the end of the log.
    fn read(&mut self, reader: &mut impl BufRead, line: usize) -> Result<bool, LogError> {
        let Some(ending) = next_line(reader, line, &mut self.bytes)? else {
            return Ok(false);
        };
        self.ends.push(self.bytes.len());
        self.last_ending = ending;
        Ok(true)
    }

    fn lines(&self) -> impl Iterator<Item = &[u8]> {
        lines_of(&self.bytes, &self.ends)
    }

    fn parse(&mut self, options: &Options) {
        let parsed: Vec<Parsed> = self.lines().map(|line| parse(options, line)).collect();
        self.parsed = parsed;
    }
}

/// The lines of a chunk's `bytes`, which end at `ends`.
fn lines_of<'b>(bytes: &'b [u8], ends: &'b [usize]) -> impl Iterator<Item = &'b [u8]> {
    let starts = std::iter::once(0).chain(ends.iter().copied());
    starts.zip(ends).map(|(s, &e)| &bytes[s..e])
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
    convert_in_chunks(reader, options, workers, CHUNK_BYTES, f)
}

fn convert_in_chunks(
    reader: impl BufRead,
    options: Options,
    workers: usize,
    chunk_bytes: usize,
    f: impl FnMut(usize, Converted<'_>) -> Result<(), TraceError>,
) -> Result<Summary, ConvertError> {
    if workers == 0 {
        return convert(reader, options, f);
    }
    std::thread::scope(|scope| {
        let mut pool = Pool {
            to: Vec::new(),
            from: Vec::new(),
            sent: 0,
            applied: 0,
        };
        for _ in 0..workers {
            let (to, inbox) = sync_channel::<Chunk>(IN_FLIGHT_PER_WORKER);
            let (outbox, from) = sync_channel::<Chunk>(IN_FLIGHT_PER_WORKER);
            let options = options.clone();
            scope.spawn(move || {
                for mut chunk in inbox {
                    chunk.parse(&options);
                    if outbox.send(chunk).is_err() {
                        break;
                    }
                }
            });
            pool.to.push(to);
            pool.from.push(from);
        }
        // The pool is dropped before the scope joins the workers: they see their channels
        // closed and end, whatever happened here.
        read_with(pool, reader, Converter::new(options), chunk_bytes, f)
    })
}

/// The workers' channels, and how many chunks went out and came back applied.
struct Pool {
    to: Vec<SyncSender<Chunk>>,
    from: Vec<Receiver<Chunk>>,
    sent: usize,
    applied: usize,
}

impl Pool {
    /// Hands `chunk` to the next worker in turn, so that chunks come back in the log's order.
    fn send(&mut self, chunk: Chunk) -> Result<(), ConvertError> {
        let n = self.to.len();
        let first = chunk.first;
        self.to[self.sent % n]
            .send(chunk)
            .map_err(|_| worker_gone(first))?;
        self.sent += 1;
        Ok(())
    }

    /// The oldest chunk not applied yet, parsed; `line`: where the log is read to.
    fn next(&mut self, line: usize) -> Result<Chunk, ConvertError> {
        let n = self.from.len();
        let chunk = self.from[self.applied % n]
            .recv()
            .map_err(|_| worker_gone(line))?;
        self.applied += 1;
        Ok(chunk)
    }

    fn pending(&self) -> usize {
        self.sent - self.applied
    }
}

/// A worker gone (it panicked, which the scope then raises here): near `line`.
fn worker_gone(line: usize) -> ConvertError {
    ConvertError::Trace(TraceError::new(
        line,
        "a thread parsing the log stopped".to_owned(),
    ))
}

/// Reads the log on this thread, in chunks for the pool's workers, and applies what they
/// parsed in the log's order.
fn read_with(
    mut pool: Pool,
    mut reader: impl BufRead,
    mut converter: Converter,
    chunk_bytes: usize,
    mut f: impl FnMut(usize, Converted<'_>) -> Result<(), TraceError>,
) -> Result<Summary, ConvertError> {
    let most = pool.to.len() * IN_FLIGHT_PER_WORKER;
    let mut apply = |chunk: Chunk, converter: &mut Converter| -> Result<(), ConvertError> {
        let Chunk {
            first,
            bytes,
            ends,
            parsed,
            last_ending,
        } = chunk;
        let last = ends.len().saturating_sub(1);
        for (i, (line, parsed)) in lines_of(&bytes, &ends).zip(parsed).enumerate() {
            let ending = if i == last {
                last_ending
            } else {
                Ending::Newline
            };
            let made = converter.last_line_torn(first + i, line, ending, |c| {
                c.apply(first + i, line, parsed)
            })?;
            converter.hand_on(first + i, made, &mut f)?;
        }
        Ok(())
    };
    let mut chunk = Chunk::new(1);
    let mut line = 0;
    // A read error is reported once every line before it is applied: an earlier line's error
    // comes first, as it does line by line.
    let unread = loop {
        line += 1;
        match chunk.read(&mut reader, line) {
            Ok(true) => {}
            Ok(false) => break None,
            Err(e) => break Some(e),
        }
        if chunk.bytes.len() >= chunk_bytes {
            pool.send(std::mem::replace(&mut chunk, Chunk::new(line + 1)))?;
            if pool.pending() >= most {
                apply(pool.next(line)?, &mut converter)?;
            }
        }
    };
    if !chunk.ends.is_empty() {
        pool.send(chunk)?;
    }
    while pool.pending() > 0 {
        apply(pool.next(line)?, &mut converter)?;
    }
    if let Some(e) = unread {
        return Err(e.into());
    }
    converter.end(line - 1, &mut f)
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

    /// Converts `text` with `workers` (none: line by line) in chunks of `chunk_bytes`; `stop`:
    /// the callback fails at that record.
    fn run(reader: impl BufRead, workers: usize, chunk_bytes: usize, stop: usize) -> Outcome {
        let mut records = Vec::new();
        let options = Options {
            safe: Some(["read_file".to_owned()].into()),
        };
        let summary = convert_in_chunks(reader, options, workers, chunk_bytes, |line, made| {
            records.push((line, made.record().cloned()));
            match records.len() == stop {
                true => Err(TraceError::new(line, "stopped".to_owned())),
                false => Ok(()),
            }
        });
        let summary = summary.map(|s| format!("{s:?}")).map_err(|e| e.to_string());
        (records, summary)
    }

    /// Every way of cutting `text` into chunks, with one to three workers, gives what reading
    /// it line by line gives.
    fn same_as_line_by_line(name: &str, text: &[u8], stop: usize) {
        let want = run(text, 0, CHUNK_BYTES, stop);
        for workers in 1..=3 {
            for chunk_bytes in [1, 100, 4096, CHUNK_BYTES] {
                let got = run(text, workers, chunk_bytes, stop);
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
            let want = run(reader(text), 0, CHUNK_BYTES, 0);
            assert!(want.1.is_err(), "{want:?}");
            for (workers, chunk_bytes) in [(1, 1), (2, 300), (3, CHUNK_BYTES)] {
                assert_eq!(run(reader(text), workers, chunk_bytes, 0), want, "{ok}");
            }
        }
    }
}
