//! Reading traces: JSON Lines from a file or stdin, one record per line, with errors that name
//! the line and say what is wrong in words (not only serde's).

use std::io::BufRead;
use std::sync::mpsc::{Receiver, Sender};

use serde_json::Value;
use tep_model::graph::NodeId;
use tep_model::trace::TraceRecord;

use crate::checker::{CheckOptions, CheckReport, Checker, TraceError};
use crate::work_queue::{Pool, with_workers};

/// `times` copies of a trace's records one after the other, with session seqs (and the seqs
/// events name) renumbered so the log stays increasing; a header line is dropped. Call ids may
/// repeat from one batch to the next, as they may in a real session. For load tests and
/// benchmarks of the streaming checker.
#[cfg(any(test, feature = "testing"))]
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

/// Lines longer than this (not counting the newline) are refused rather than buffered.
pub const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// How much of a trace one worker of [`for_each_record_parallel`] parses at once: small enough
/// that the chunks in flight (and their records) stay a few megabytes, large enough that
/// handing them over (a thread woken each time) costs little. Measured on 2 cores with eight
/// chunks a worker in flight, `tep check` of the corpus mix (633,601 records): 163–174 ms with
/// 256 KiB, 176–200 ms with 128 KiB, 190–203 ms with 64 KiB; peak memory 38, 30 and 23 MB.
const PARALLEL_CHUNK_BYTES: usize = 256 * 1024;

/// The sizes reading works with; tests shrink them to reach every edge with small inputs.
#[derive(Debug, Clone, Copy)]
struct Sizes {
    chunk: usize,
    max_line: usize,
}

const SIZES: Sizes = Sizes {
    chunk: PARALLEL_CHUNK_BYTES,
    max_line: MAX_LINE_BYTES,
};

/// Parses one line of a trace.
///
/// A record that leads with its tag (as every trace this toolkit writes does) is read in one
/// typed pass ([`TraceRecord::from_json_tag_first`]); anything else, and every error, goes
/// through a `serde_json::Value`, which accepts the same records and words the errors.
#[inline]
pub fn parse_record(line_no: usize, text: &str) -> Result<TraceRecord, TraceError> {
    TraceRecord::from_json_tag_first(text).map_or_else(|| parse_record_in_words(line_no, text), Ok)
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
                    .map_err(|e| TraceError::new(line_no, e.to_string()))?;
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
    check_reader_parallel(options, reader, 0)
}

/// [`check_reader`] with the parsing on `workers` threads ([`for_each_record_parallel`]); the
/// report is the same.
pub fn check_reader_parallel(
    options: &CheckOptions,
    reader: impl BufRead,
    workers: usize,
) -> Result<CheckReport, TraceError> {
    let mut checker = Checker::new(options.clone());
    for_each_record_parallel(reader, workers, |line, record| checker.feed(line, record))?;
    checker.finish()
}

/// Calls `f` with each record and its line number. Blank lines are skipped.
///
/// Parses each line where it lies in the reader's buffer ([`BufRead::fill_buf`]): a trace
/// held in memory (`&[u8]`) is never copied, and from a [`std::io::BufReader`] only a line
/// that straddles two of its fills is gathered into a buffer of its own.
pub fn for_each_record(
    reader: impl BufRead,
    f: impl FnMut(usize, TraceRecord) -> Result<(), TraceError>,
) -> Result<(), TraceError> {
    read_sequentially(reader, SIZES, f)
}

fn read_sequentially(
    mut reader: impl BufRead,
    sizes: Sizes,
    mut f: impl FnMut(usize, TraceRecord) -> Result<(), TraceError>,
) -> Result<(), TraceError> {
    // The start of a line the reader's buffer ended inside of; it holds no newline.
    let mut partial: Vec<u8> = Vec::new();
    let mut line_no = 0;
    loop {
        let available = match reader.fill_buf() {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(TraceError::new(line_no + 1, format!("cannot read: {e}"))),
        };
        if available.is_empty() {
            // The last line may lack its newline.
            if !partial.is_empty() {
                parse_line(line_no + 1, &partial, &mut f)?;
            }
            return Ok(());
        }
        let used = if partial.is_empty() {
            match memchr::memrchr(b'\n', available) {
                Some(i) => {
                    parse_complete_lines(&available[..=i], sizes, &mut line_no, &mut f)?;
                    i + 1
                }
                None => 0,
            }
        } else {
            match memchr::memchr(b'\n', available) {
                Some(i) => {
                    partial.extend_from_slice(&available[..=i]);
                    parse_complete_lines(&partial, sizes, &mut line_no, &mut f)?;
                    partial.clear();
                    // The lines after it are parsed where they lie, at the next fill.
                    reader.consume(i + 1);
                    continue;
                }
                None => 0,
            }
        };
        // What is left of the buffer holds no newline: it starts (or goes on with) a line.
        let rest = &available[used..];
        if partial.len() + rest.len() > sizes.max_line {
            return Err(too_long(line_no + 1, sizes));
        }
        partial.extend_from_slice(rest);
        let consumed = available.len();
        reader.consume(consumed);
    }
}

/// [`for_each_record`] with the parsing spread over `workers` threads: this thread reads the
/// trace in chunks of whole lines, the workers parse them, and `f` is called here, in the
/// trace's order, exactly as [`for_each_record`] calls it (same records, same line numbers,
/// same first error). Parsing is most of a check's work ([`check_reader`] spends about two
/// thirds of its time there), so on a machine with spare cores the checker keeps up with
/// the workers. Memory stays bounded: at most eight chunks per worker are in flight (with what
/// they parse to), and a chunk is read only while those hold fewer than
/// [`MAX_IN_FLIGHT_BYTES`]. With no worker it is [`for_each_record`].
pub fn for_each_record_parallel(
    reader: impl BufRead,
    workers: usize,
    f: impl FnMut(usize, &TraceRecord) -> Result<(), TraceError>,
) -> Result<(), TraceError> {
    read_in_parallel(reader, workers, SIZES, f)
}

/// How many workers [`for_each_record_parallel`] is worth on this machine for a trace of
/// `bytes` (`None`: not known, as on a pipe): one per core (the thread that checks uses a
/// fraction of one); none on a single core, or for a trace too short to repay starting them.
pub fn parsing_workers(bytes: Option<u64>) -> usize {
    if bytes.is_some_and(|b| b < PARALLEL_FROM_BYTES) {
        return 0;
    }
    match std::thread::available_parallelism().map_or(1, usize::from) {
        1 => 0,
        cores => cores.min(MAX_WORKERS),
    }
}

/// Below this, a trace is checked sooner on one thread (measured: a 0.3 MB trace takes 4.6 ms
/// on one thread and 7.6 ms with two workers; a 13 MB one 50 ms and 45 ms).
const PARALLEL_FROM_BYTES: u64 = 4 * 1024 * 1024;

/// Past this many workers the checking thread, not parsing, sets the pace.
const MAX_WORKERS: usize = 8;

/// The parallel reader reads a chunk only while the chunks in flight (read, not yet checked)
/// hold fewer bytes than this. From two workers on, it bounds short lines too (eight chunks of
/// [`PARALLEL_CHUNK_BYTES`] a worker are 2 MiB); long lines always reach it, so the
/// lines being parsed at once hold at most this plus one line ([`MAX_LINE_BYTES`]), whatever
/// `-j` is. Counting chunks instead let 8 workers parse eight 16 MiB lines at once (4.7 GB).
pub const MAX_IN_FLIGHT_BYTES: usize = 4 * 1024 * 1024;

/// Chunks in flight (read, not yet checked) per worker, and at most [`MAX_IN_FLIGHT_BYTES`] in
/// all: enough that no core idles while one of the threads waits for the scheduler (measured
/// with 64 KiB chunks, 2 cores: the corpus mix in 190–203 ms with 8 a worker, 199–227 ms with
/// 4; 4 was 6% faster than 2). The session-log reader has its own figure, measured on its own
/// lines (`deepseek_harness::parallel`).
const CHUNKS_IN_FLIGHT_PER_WORKER: usize = 8;

/// A chunk of whole lines for a worker, and what it parsed them to. Its bytes are filled again
/// once checked, and its records' vector by the worker that parsed it, so that a long trace
/// allocates them once.
struct Chunk {
    bytes: Vec<u8>,
    /// The chunk is `bytes[..len]`.
    len: usize,
    records: Records,
    /// How many lines the chunk holds.
    lines: usize,
    /// The first line that could not be parsed (numbered within the chunk); the records after
    /// it are not parsed.
    error: Option<TraceError>,
    /// The worker that parsed it, to free its records (none: this thread did).
    parser: Option<usize>,
}

impl Chunk {
    fn parse(&mut self, sizes: Sizes) {
        self.records.clear();
        let (mut lines, bytes) = (0, &self.bytes[..self.len]);
        let records = &mut self.records;
        let mut keep = |line: usize, record: TraceRecord| {
            records.push((line, record));
            Ok(())
        };
        let complete = memchr::memrchr(b'\n', bytes).map_or(0, |i| i + 1);
        let mut result = parse_complete_lines(&bytes[..complete], sizes, &mut lines, &mut keep);
        // Only the trace's last chunk may end without a newline; its reader refused that
        // line if it was too long.
        if result.is_ok() && complete < bytes.len() {
            lines += 1;
            result = parse_line(lines, &bytes[complete..], &mut keep);
        }
        self.lines = lines;
        self.error = result.err();
    }
}

fn read_in_parallel(
    reader: impl BufRead,
    workers: usize,
    sizes: Sizes,
    mut f: impl FnMut(usize, &TraceRecord) -> Result<(), TraceError>,
) -> Result<(), TraceError> {
    if workers == 0 {
        return read_sequentially(reader, sizes, |line, record| f(line, &record));
    }
    in_chunks(reader, workers, sizes, f)
}

/// The records of a chunk, numbered from 1 within it.
type Records = Vec<(usize, TraceRecord)>;

/// The trace in chunks, parsed by `workers` threads and this one (with no worker, this thread
/// parses every chunk: tests take that way), checked in order.
fn in_chunks(
    reader: impl BufRead,
    workers: usize,
    sizes: Sizes,
    f: impl FnMut(usize, &TraceRecord) -> Result<(), TraceError>,
) -> Result<(), TraceError> {
    // A worker's records go back to it once checked: a record is freed by the thread that
    // allocated it (freeing across threads makes the allocator contend, costing more than
    // the parsing saved), and their vector is filled again.
    let (give_back, returned): (Vec<Sender<Records>>, Vec<Receiver<Records>>) =
        (0..workers).map(|_| std::sync::mpsc::channel()).unzip();
    with_workers(
        returned.into_iter().enumerate().collect(),
        |(worker, returned), chunk: &mut Chunk| {
            for mut spent in returned.try_iter() {
                spent.clear();
                chunk.records = spent;
            }
            chunk.parser = Some(*worker);
            chunk.parse(sizes);
        },
        |pool| check_chunks(pool, &give_back, reader, sizes, f),
    )
}

/// Reads the trace in chunks for the pool, and hands `f` their records in the trace's order.
fn check_chunks(
    mut pool: Pool<'_, Chunk>,
    give_back: &[Sender<Records>],
    reader: impl BufRead,
    sizes: Sizes,
    mut f: impl FnMut(usize, &TraceRecord) -> Result<(), TraceError>,
) -> Result<(), TraceError> {
    let most_in_flight = CHUNKS_IN_FLIGHT_PER_WORKER * give_back.len().max(1);
    // The buffers of chunks checked, filled again: a long trace allocates a few.
    let mut spare: Vec<Vec<u8>> = Vec::new();
    let mut chunks = ChunkReader::new(reader, sizes.max_line);
    let mut exhausted = false;
    let mut lines_before = 0;
    // The bytes of the chunks read and not yet checked: a chunk is read only while they
    // are under the budget, so a long line is parsed with little else in flight.
    let mut in_flight_bytes = 0usize;
    loop {
        while !exhausted && pool.pending() < most_in_flight && in_flight_bytes < MAX_IN_FLIGHT_BYTES
        {
            let mut bytes = spare.pop().unwrap_or_else(|| vec![0; sizes.chunk]);
            match chunks.next(&mut bytes) {
                Some(len) => {
                    in_flight_bytes += len;
                    pool.queue(Chunk {
                        bytes,
                        len,
                        records: Vec::new(),
                        lines: 0,
                        error: None,
                        parser: None,
                    });
                }
                None => exhausted = true,
            }
        }
        let parse_here = |chunk: &mut Chunk| {
            chunk.parser = None;
            chunk.parse(sizes);
        };
        let Some(chunk) = pool.next(parse_here) else {
            break;
        };
        let Ok(mut chunk) = chunk else {
            // The worker panicked; the scope's join reports it.
            return Ok(());
        };
        for (line, record) in &chunk.records {
            f(lines_before + line, record)?;
        }
        if let Some(mut error) = chunk.error.take() {
            error.line += lines_before;
            return Err(error);
        }
        lines_before += chunk.lines;
        in_flight_bytes -= chunk.len;
        // A chunk grown for a long line is freed here, records and all: waiting to be freed
        // or reused, it would hold a line's worth.
        if chunk.bytes.len() <= sizes.chunk {
            if let Some(worker) = chunk.parser {
                // A worker that stopped frees nothing more.
                let _ = give_back[worker].send(std::mem::take(&mut chunk.records));
            }
            spare.push(chunk.bytes);
        }
    }
    match chunks.stop {
        Some(Stop::TooLong) => Err(too_long(lines_before + 1, sizes)),
        Some(Stop::Unreadable(e)) => Err(TraceError::new(
            lines_before + 1,
            format!("cannot read: {e}"),
        )),
        None => Ok(()),
    }
}

/// Why [`ChunkReader`] stopped reading before the end of the text.
pub(crate) enum Stop {
    /// A line longer than [`MAX_LINE_BYTES`] (it starts after every line sent).
    TooLong,
    Unreadable(std::io::Error),
}

/// Cuts a text of lines (a trace; a session log, `deepseek_harness::convert_parallel`) into
/// chunks of whole lines, refusing what its line-by-line reader ([`read_sequentially`]) refuses
/// at the same line.
pub(crate) struct ChunkReader<R> {
    reader: R,
    /// The longest line, without its newline.
    max_line: usize,
    /// The start of a line the last chunk did not finish.
    partial: Vec<u8>,
    /// Read to its end: never read again (a terminal would wait for another end).
    ended: bool,
    /// A read failed after the bytes read so far; they are cut into chunks first.
    failed: Option<std::io::Error>,
    pub(crate) stop: Option<Stop>,
}

impl<R: BufRead> ChunkReader<R> {
    pub(crate) fn new(reader: R, max_line: usize) -> Self {
        ChunkReader {
            reader,
            max_line,
            partial: Vec::new(),
            ended: false,
            failed: None,
            stop: None,
        }
    }

    /// Fills `bytes` with the unfinished line and what follows it, up to the last newline (or
    /// the end of the text), growing it for a long line: how many bytes it holds. What
    /// follows that newline is kept for the next chunk. `None` when nothing is left, or at a
    /// failure (kept in `stop`, to be reported once every line before it has been).
    pub(crate) fn next(&mut self, bytes: &mut Vec<u8>) -> Option<usize> {
        let max = self.max_line;
        let mut len = self.partial.len();
        if self.stop.is_none() && len > max {
            self.stop = Some(Stop::TooLong);
        }
        if let (None, Some(e)) = (&self.stop, self.failed.take()) {
            self.stop = Some(Stop::Unreadable(e));
        }
        if self.stop.is_some() {
            return None;
        }
        if bytes.len() <= len {
            bytes.resize((len + 1).next_power_of_two().min(max + 1), 0);
        }
        bytes[..len].copy_from_slice(&self.partial);
        self.partial.clear();
        // The bytes before `scanned` hold no newline.
        let mut scanned = 0;
        loop {
            while !self.ended && self.failed.is_none() && len < bytes.len() {
                match self.reader.read(&mut bytes[len..]) {
                    Ok(0) => self.ended = true,
                    Ok(n) => len += n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => self.failed = Some(e),
                }
            }
            if let Some(i) = memchr::memrchr(b'\n', &bytes[scanned..len]) {
                let end = scanned + i + 1;
                self.partial.extend_from_slice(&bytes[end..len]);
                return Some(end);
            }
            if len > max {
                self.stop = Some(Stop::TooLong);
                return None;
            }
            if let Some(e) = self.failed.take() {
                self.stop = Some(Stop::Unreadable(e));
                return None;
            }
            if self.ended {
                // What is left is the last line, without its newline.
                return (len > 0).then_some(len);
            }
            scanned = len;
            bytes.resize((bytes.len() * 2).min(max + 1), 0);
        }
    }
}

/// Parses lines that each end with a newline (`bytes` ends with one), numbering them on from
/// `line_no`. Each block of about [`BLOCK_BYTES`] (whole lines) is checked as UTF-8 at once,
/// then parsed while it is still in the cache; if a block is not all valid, it is checked line
/// by line, so that the error names the line.
fn parse_complete_lines(
    bytes: &[u8],
    sizes: Sizes,
    line_no: &mut usize,
    f: &mut impl FnMut(usize, TraceRecord) -> Result<(), TraceError>,
) -> Result<(), TraceError> {
    let mut from = 0;
    while from < bytes.len() {
        let rest = &bytes[from..];
        let cut = rest.len().min(BLOCK_BYTES);
        // The block ends after the last newline within reach, or after the first one past it
        // (a line longer than a block): `bytes` ends with a newline, so one is always found.
        let end = match memchr::memrchr(b'\n', &rest[..cut]) {
            Some(i) => i + 1,
            None => memchr::memchr(b'\n', rest).map_or(rest.len(), |i| i + 1),
        };
        parse_block(&rest[..end], sizes, line_no, f)?;
        from += end;
    }
    Ok(())
}

/// How much of a region of whole lines is checked as UTF-8 and parsed at a time: small
/// enough to stay in the cache between the two.
const BLOCK_BYTES: usize = 64 * 1024;

fn parse_block(
    bytes: &[u8],
    sizes: Sizes,
    line_no: &mut usize,
    f: &mut impl FnMut(usize, TraceRecord) -> Result<(), TraceError>,
) -> Result<(), TraceError> {
    let valid = simdutf8::basic::from_utf8(bytes).ok();
    let mut start = 0;
    for i in memchr::memchr_iter(b'\n', bytes) {
        let end = i + 1;
        *line_no += 1;
        // The limit is on the line without its newline, as on a last line that has none.
        if i - start > sizes.max_line {
            return Err(too_long(*line_no, sizes));
        }
        match valid {
            // Both ends follow a newline (or start the region): char boundaries.
            Some(text) => parse_text(*line_no, &text[start..end], f)?,
            None => parse_line(*line_no, &bytes[start..end], f)?,
        }
        start = end;
    }
    Ok(())
}

fn too_long(line_no: usize, sizes: Sizes) -> TraceError {
    let most = sizes.max_line;
    TraceError::new(line_no, format!("line longer than {most} bytes"))
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
    // A record starts with `{`: the whitespace test is for everything else.
    if !text.starts_with('{') && text.trim().is_empty() {
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
            "line 3: unknown stage `pree` (did you mean `pre`?)"
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

    /// Every line the reference writes: each corpus trace of both revisions, as the
    /// conformance crate snapshots them (`conformance/tests/snapshots`, held fresh there).
    fn written_lines() -> Vec<String> {
        let dir = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../conformance/tests/snapshots"
        );
        let mut lines = Vec::new();
        for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{dir}: {e}")) {
            let path = entry.unwrap_or_else(|e| panic!("{e}")).path();
            if !path.to_string_lossy().contains("/trace@") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{e}"));
            // After insta's front matter (`---` … `---`), one record a line.
            let records = text.splitn(3, "---\n").nth(2).unwrap_or_default();
            lines.extend(records.lines().map(str::to_owned));
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
            let fast = TraceRecord::from_json_tag_first(line)
                .unwrap_or_else(|| panic!("declined: {line}"));
            assert_eq!(Ok(fast), words(line), "{line}");
        }
    }

    /// An injected context's data is read by hand: a member named twice or unknown there is
    /// the worded path's to refuse, never read past.
    #[test]
    fn a_context_with_a_member_twice_or_unknown_takes_the_worded_path() {
        let contexts: Vec<String> = written_lines()
            .into_iter()
            .filter(|l| l.contains(r#""type":"user/message""#))
            .collect();
        assert!(!contexts.is_empty());
        for line in &contexts {
            for member in [
                r#""id":"x""#,
                r#""role":"user""#,
                r#""content":[]"#,
                r#""source":{"kind":"user"}"#,
                r#""extra":1"#,
            ] {
                let changed = line.replacen(r#""data":{"#, &format!(r#""data":{{{member},"#), 1);
                assert_ne!(&changed, line);
                assert!(
                    TraceRecord::from_json_tag_first(&changed).is_none(),
                    "{changed}"
                );
                assert!(words(&changed).is_err(), "{changed}");
            }
        }
    }

    #[test]
    fn records_in_another_order_take_the_worded_path() {
        let tag_later = r#"{"node":"pre","call":"c1","outcome":"deny","kind":"stage"}"#;
        assert!(TraceRecord::from_json_tag_first(tag_later).is_none());
        let data_first = r#"{"kind":"event","call":"c1","event":{"seq":1,"time":0,"data":{"turn":1,"step":1,"callId":"c1","name":"read","arguments":"{}"},"type":"tool/call"}}"#;
        assert!(TraceRecord::from_json_tag_first(data_first).is_none());
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
        which: usize,
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
            // Whitespace (JSON's four kinds, or a character JSON does not count as such) before
            // a token.
            4 => {
                // After a `{`, `[` or `,`; after a `:`; or after a value.
                let i = [*at.get(&slots), field.value, field.end][which % 3];
                let space = WHITESPACE[which % WHITESPACE.len()];
                format!("{}{space}{}", &line[..i], &line[i..])
            }
            // Something after the record.
            5 => format!("{line}{}", TRAILING[which % TRAILING.len()]),
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
        "afterMs",
        "parentToken",
        "additionalContexts",
        "id",
        "role",
        "source",
        "k\\u0069nd",
        "extra",
    ];
    /// Values of every JSON type, enum spellings the worded path treats apart, and the spellings
    /// a hand-written reader can get wrong: escapes (valid, invalid, surrogates), raw control
    /// characters, non-ASCII text, numbers JSON forbids or u64 cannot hold, cut literals,
    /// serde_json's marker keys, a repeated key inside a value, and nesting past serde's limit.
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
        r#""\u0063\u0031""#,
        r#""pr\u0065""#,
        r#""a\"b\\c\/d\b\f\n\r\t""#,
        r#""\ud83d\ude00""#,
        r#""\ud800""#,
        r#""\udc00x""#,
        r#""\ud800\u0041""#,
        r#""\x""#,
        r#""\u00g0""#,
        "\"a\u{1}b\"",
        "\"caf\u{e9} \u{1F600}\"",
        // Longer than a word, with the byte that ends a plain run at each offset within one.
        "\"0123456\u{1}89abcdefgh\"",
        "\"01234567\u{1f}9abcdefgh\"",
        r#""0123456789abcde\u0041\n""#,
        "\"\u{e9}\u{e9}\u{e9}\u{e9}\u{7f}\u{1}\u{e9}\"",
        "\"\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\"",
        "01",
        "-0",
        "1e2",
        "1.0",
        "18446744073709551615",
        "18446744073709551616",
        "nul",
        "tru",
        "nullx",
        r#"{"$serde_json::private::RawValue":"1"}"#,
        r#"{"$serde_json::private::Number":"1"}"#,
        r#"{"a":1,"a":"2"}"#,
        r#"{"path":"a","n":[1,true,null,{"k":"v"}]}"#,
        r#"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]"#,
        r#"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]"#,
    ];
    /// What may stand between tokens: JSON's whitespace, and characters JSON does not count as
    /// whitespace (a form feed, a no-break space, a byte-order mark).
    const WHITESPACE: &[&str] = &[
        " ", "\t", "\r", "\n", " \t\r ", "\u{c}", "\u{a0}", "\u{feff}",
    ];
    /// What may follow a record on its line.
    const TRAILING: &[&str] = &[" ", "\t\r", "x", "}", ",", "{}", "\u{0}"];

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(3000))]

        /// Whatever a line holds (a field repeated, unknown, missing, of another type, an enum
        /// spelled as a map, a string escaped, a number spelled another way, whitespace between
        /// tokens, bytes after the record), `parse_record` answers exactly what the worded path
        /// answers: the single pass never accepts a record the worded path refuses or reads
        /// differently.
        #[test]
        fn the_single_pass_agrees_with_the_worded_path(
            pick in proptest::prelude::any::<proptest::sample::Index>(),
            how in 0..7usize,
            at in proptest::prelude::any::<proptest::sample::Index>(),
            key in 0..KEYS.len(),
            value in 0..VALUES.len(),
            which in 0..24usize,
        ) {
            thread_local! {
                static LINES: Vec<String> = written_lines();
            }
            let line = LINES.with(|lines| pick.get(lines).clone());
            let mutated = mutate(&line, how, at, KEYS[key], VALUES[value], which);
            proptest::prop_assert_eq!(
                parse_record(7, &mutated).map_err(|e| e.to_string()),
                words(&mutated),
                "{}", mutated
            );
        }
    }

    /// A trace handed out in pieces of the given sizes (cycled), failing once `fail_at` bytes
    /// have been read (if given), and interrupted now and then, as a pipe may be.
    struct Pieces {
        bytes: Vec<u8>,
        at: usize,
        sizes: Vec<usize>,
        reads: usize,
        fail_at: Option<usize>,
    }

    impl std::io::Read for Pieces {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            self.reads += 1;
            if self.reads.is_multiple_of(7) {
                return Err(std::io::ErrorKind::Interrupted.into());
            }
            let end = self
                .fail_at
                .unwrap_or(self.bytes.len())
                .min(self.bytes.len());
            if self.at == end && self.fail_at.is_some_and(|f| f <= self.bytes.len()) {
                return Err(std::io::Error::other("the disk went away"));
            }
            let piece = self.sizes[self.reads % self.sizes.len()];
            let n = piece.min(buf.len()).min(end - self.at);
            buf[..n].copy_from_slice(&self.bytes[self.at..self.at + n]);
            self.at += n;
            Ok(n)
        }
    }

    /// What a reader made of a trace: each record with its line, then how it ended.
    fn outcome(
        bytes: &[u8],
        pieces: &[usize],
        fail_at: Option<usize>,
        stop_after: Option<usize>,
        read: impl FnOnce(
            Pieces,
            &mut dyn FnMut(usize, TraceRecord) -> Result<(), TraceError>,
        ) -> Result<(), TraceError>,
    ) -> (Vec<(usize, TraceRecord)>, Result<(), TraceError>) {
        let reader = Pieces {
            bytes: bytes.to_vec(),
            at: 0,
            sizes: pieces.to_vec(),
            reads: 0,
            fail_at,
        };
        let mut seen = Vec::new();
        let end = read(reader, &mut |line, record| {
            if stop_after == Some(seen.len()) {
                return Err(TraceError::new(line, "the checker refused it"));
            }
            seen.push((line, record));
            Ok(())
        });
        (seen, end)
    }

    /// A trace's lines, some broken: a blank line, a carriage return, a line that is not
    /// JSON, one that is not UTF-8, and written records (some longer than the limit).
    fn trace_lines() -> impl proptest::strategy::Strategy<Value = Vec<Vec<u8>>> {
        use proptest::prelude::*;
        let line = prop_oneof![
            8 => any::<proptest::sample::Index>().prop_map(|pick| {
                thread_local! {
                    static LINES: Vec<String> = written_lines();
                }
                LINES.with(|lines| pick.get(lines).clone().into_bytes())
            }),
            1 => Just(Vec::new()),
            1 => Just(b"  \r".to_vec()),
            1 => Just(b"{oops".to_vec()),
            1 => Just(b"{\"kind\":\"stage\",\"node\":\"\xff\"}".to_vec()),
        ];
        proptest::collection::vec(line, 0..40)
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(400))]

        /// Read in parallel, a trace gives `f` the same records with the same line numbers,
        /// and ends the same way (the first bad line, the first refusal by `f`, a line too
        /// long, a failed read), as read in one thread: whatever the chunk size, the limit on
        /// a line, how the reads fall, and how many workers (none: the checking thread parses
        /// every chunk).
        #[test]
        fn reading_in_parallel_agrees_with_reading_in_one_thread(
            lines in trace_lines(),
            last_newline in proptest::prelude::any::<bool>(),
            chunk in 1..700usize,
            max_line in 60..500usize,
            pieces in proptest::collection::vec(1..900usize, 1..5),
            fail in proptest::option::of(proptest::prelude::any::<proptest::sample::Index>()),
            stop_after in proptest::option::of(0..30usize),
            workers in 0..4usize,
        ) {
            let mut bytes = lines.join(&b'\n');
            if last_newline && !lines.is_empty() {
                bytes.push(b'\n');
            }
            let fail_at = fail.map(|at| at.index(bytes.len() + 1));
            let sizes = Sizes { chunk, max_line };
            let one = outcome(&bytes, &pieces, fail_at, stop_after, |r, f| {
                read_sequentially(std::io::BufReader::with_capacity(16, r), sizes, f)
            });
            let parallel = outcome(&bytes, &pieces, fail_at, stop_after, |r, f| {
                let reader = std::io::BufReader::with_capacity(16, r);
                // With no worker, this thread parses every chunk.
                in_chunks(reader, workers, sizes, |line, record| f(line, record.clone()))
            });
            proptest::prop_assert_eq!(one, parallel);
        }
    }

    #[test]
    fn a_line_may_be_as_long_as_the_limit_with_or_without_its_newline() {
        let line = r#"{"kind":"stage","node":"allResults"}"#;
        let padded = |n: usize| format!("{line}{}", " ".repeat(n - line.len()));
        for chunk in [8, 64, 4096] {
            let sizes = Sizes {
                chunk,
                max_line: 100,
            };
            for (text, longest_ok) in [
                (format!("{}\n{}", padded(100), padded(100)), true),
                (format!("{}\n{}\n", padded(100), padded(100)), true),
                (format!("{}\n{}", padded(100), padded(101)), false),
                (format!("{}\n{}\n", padded(100), padded(101)), false),
                (format!("{}\r\n{}", padded(99), padded(100)), true),
            ] {
                let want = if longest_ok {
                    Ok(2)
                } else {
                    Err("line 2: line longer than 100 bytes".to_owned())
                };
                let mut read = 0;
                let one = read_sequentially(text.as_bytes(), sizes, |_, _| {
                    read += 1;
                    Ok(())
                });
                assert_eq!(one.map(|()| read).map_err(|e| e.to_string()), want.clone());
                let mut read = 0;
                let parallel = read_in_parallel(text.as_bytes(), 2, sizes, |_, _| {
                    read += 1;
                    Ok(())
                });
                assert_eq!(parallel.map(|()| read).map_err(|e| e.to_string()), want);
            }
        }
    }

    /// A trace in memory is parsed where it lies, a block of lines at a time: across blocks,
    /// with a line longer than a block, and with a line that is not UTF-8 in a later block, it
    /// reads as it does through a small buffer (each line gathered on its own).
    #[test]
    fn a_trace_in_memory_reads_as_one_read_through_a_small_buffer() {
        let mark = |by: &str| {
            format!(r#"{{"kind":"mark","call":"c1","mark":"body-settled","by":"{by}"}}"#)
        };
        let mut lines: Vec<Vec<u8>> = (0..3 * BLOCK_BYTES / 60)
            .map(|i| mark(&format!("w{i}")).into_bytes())
            .collect();
        lines.insert(700, mark(&"x".repeat(BLOCK_BYTES + 10)).into_bytes());
        lines.insert(1500, Vec::new());
        let whole = lines.join(&b'\n');
        let mut broken = lines.clone();
        broken.insert(2900, b"{\"kind\":\"mark\",\"by\":\"\xff\"}".to_vec());
        let broken = broken.join(&b'\n');
        for bytes in [&whole, &broken] {
            assert!(bytes.len() > 2 * BLOCK_BYTES);
            let read = |reader: &mut dyn BufRead| {
                let mut seen = Vec::new();
                let end = read_sequentially(reader, SIZES, |line, record| {
                    seen.push((line, record));
                    Ok(())
                });
                (seen, end.map_err(|e| e.to_string()))
            };
            let (seen, end) = read(&mut bytes.as_slice());
            assert_eq!(
                (seen.clone(), end.clone()),
                read(&mut std::io::BufReader::with_capacity(16, bytes.as_slice()))
            );
            assert_eq!(
                seen.len(),
                if bytes == &whole {
                    lines.len() - 1
                } else {
                    2900 - 1
                }
            );
            assert_eq!(
                seen.last().map(|(line, _)| *line),
                Some(if bytes == &whole { lines.len() } else { 2900 })
            );
        }
        let end = read_sequentially(broken.as_slice(), SIZES, |_, _| Ok(()));
        assert_eq!(
            end.map_err(|e| e.to_string()),
            Err("line 2901: not valid UTF-8 (at byte 21)".to_owned())
        );
    }

    #[test]
    fn a_short_trace_is_read_on_one_thread_and_a_long_one_on_a_thread_per_core() {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        assert_eq!(parsing_workers(Some(0)), 0);
        assert_eq!(parsing_workers(Some(PARALLEL_FROM_BYTES - 1)), 0);
        for long in [Some(PARALLEL_FROM_BYTES), None] {
            assert_eq!(parsing_workers(long), parsing_workers(Some(u64::MAX)));
            assert_eq!(parsing_workers(long) > 0, cores > 1, "{cores} cores");
            assert!(parsing_workers(long) <= cores.min(MAX_WORKERS));
        }
    }
}
