//! A session log stored as Zstandard frames, read back as its lines. deepseek-harness writes
//! `session.jsonl.zstd` by default (`compression: 'zstd'`), appending one frame per flush; a
//! session killed while a frame was written leaves that last frame broken off. The harness
//! keeps what the broken frame decodes to when it reloads the session, and so does
//! [`ZstdFrames`]: it streams the frames one after another, and ends the text where a last
//! frame the input breaks off stops decoding ([`ZstdFrames::broken_off`]).

use std::io::{self, BufRead, Read};

use ruzstd::decoding::{BlockDecodingStrategy, FrameDecoder};
use tep_check::deepseek_harness::ZSTD_MAGIC;

/// Whether `reader`'s next bytes begin a Zstandard frame (it reads ahead, consuming nothing).
pub fn starts_compressed(reader: &mut impl BufRead) -> io::Result<bool> {
    Ok(reader.fill_buf()?.starts_with(&ZSTD_MAGIC))
}

/// The text of every Zstandard frame of `source`, in order, as one stream.
pub struct ZstdFrames<R> {
    source: R,
    decoder: FrameDecoder,
    in_frame: bool,
    frames: usize,
    broken_off: bool,
}

impl<R> std::fmt::Debug for ZstdFrames<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZstdFrames")
            .field("in_frame", &self.in_frame)
            .field("frames", &self.frames)
            .field("broken_off", &self.broken_off)
            .finish_non_exhaustive()
    }
}

impl<R: BufRead> ZstdFrames<R> {
    pub fn new(source: R) -> Self {
        ZstdFrames {
            source,
            decoder: FrameDecoder::new(),
            in_frame: false,
            frames: 0,
            broken_off: false,
        }
    }

    /// The frames begun so far.
    pub fn frames(&self) -> usize {
        self.frames
    }

    /// Whether the input broke off inside the last frame: the text ends where it stopped
    /// decoding.
    pub fn broken_off(&self) -> bool {
        self.broken_off
    }

    /// Decodes the open frame until `want` bytes can be handed out or it ends.
    fn decode(&mut self, want: usize) -> io::Result<()> {
        while self.decoder.can_collect() < want && !self.decoder.is_finished() {
            let more = want - self.decoder.can_collect();
            if let Err(e) = self
                .decoder
                .decode_blocks(&mut self.source, BlockDecodingStrategy::UptoBytes(more))
            {
                return self.stopped(&e.to_string());
            }
        }
        Ok(())
    }

    /// Decoding stopped at an error: the end of a frame the input breaks off in, or (bytes
    /// after it) a damaged frame, an error.
    fn stopped(&mut self, why: &str) -> io::Result<()> {
        if !self.source.fill_buf()?.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("Zstandard frame {} cannot be decoded: {why}", self.frames),
            ));
        }
        self.broken_off = true;
        Ok(())
    }
}

impl<R: BufRead> Read for ZstdFrames<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        loop {
            if self.in_frame {
                self.decode(buf.len())?;
                let n = self.decoder.read(buf)?;
                if n > 0 {
                    return Ok(n);
                }
                if self.broken_off {
                    return Ok(0);
                }
                if self.decoder.is_finished() && self.decoder.can_collect() == 0 {
                    self.in_frame = false;
                }
                continue;
            }
            if self.broken_off || self.source.fill_buf()?.is_empty() {
                return Ok(0);
            }
            self.frames += 1;
            match self.decoder.reset(&mut self.source) {
                Ok(()) => self.in_frame = true,
                Err(e) => {
                    // A header the input breaks off in ends the text, like a broken block.
                    self.stopped(&e.to_string())?;
                    return Ok(0);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::io::BufReader;

    use ruzstd::encoding::{CompressionLevel, compress_to_vec};

    use super::*;

    fn frames_of(parts: &[&str]) -> Vec<u8> {
        parts
            .iter()
            .flat_map(|p| compress_to_vec(p.as_bytes(), CompressionLevel::Fastest))
            .collect()
    }

    fn read_all(bytes: &[u8], buffer: usize) -> (io::Result<String>, usize, bool) {
        let mut frames = ZstdFrames::new(BufReader::with_capacity(buffer, bytes));
        let mut text = Vec::new();
        let got = frames
            .read_to_end(&mut text)
            .map(|_| String::from_utf8(text).unwrap());
        (got, frames.frames(), frames.broken_off())
    }

    #[test]
    fn every_frame_is_read_in_order_through_any_buffer() {
        let parts = [
            "{\"a\":1}\n",
            "",
            "{\"b\":2}\n{\"c\":3}\n",
            &"x".repeat(300_000),
        ];
        let bytes = frames_of(&parts);
        assert!(starts_compressed(&mut &bytes[..]).unwrap());
        assert!(!starts_compressed(&mut &b"{\"type\""[..]).unwrap());
        for buffer in [1, 7, 8192] {
            let (text, frames, broken) = read_all(&bytes, buffer);
            assert_eq!(text.unwrap(), parts.concat(), "buffer {buffer}");
            assert_eq!((frames, broken), (4, false));
        }
    }

    #[test]
    fn a_last_frame_the_input_breaks_off_in_ends_the_text() {
        let whole = frames_of(&["one\n", "two\nthree\n"]);
        let first = frames_of(&["one\n"]).len();
        for cut in [first + 2, first + 6, whole.len() - 1] {
            let (text, frames, broken) = read_all(&whole[..cut], 64);
            let text = text.unwrap();
            assert!(text.starts_with("one\n") && "one\ntwo\nthree\n".starts_with(&text));
            assert_eq!((frames, broken), (2, true), "cut at {cut}");
        }
    }

    #[test]
    fn a_damaged_frame_with_frames_after_it_is_an_error() {
        let mut bytes = frames_of(&["one\n", &"two\n".repeat(1000), "three\n"]);
        let first = frames_of(&["one\n"]).len();
        // The second frame's block header, beyond the frame header: a reserved block type.
        bytes[first + 6] = 0xff;
        bytes[first + 7] = 0xff;
        bytes[first + 8] = 0xff;
        let (text, _, _) = read_all(&bytes, 64);
        let e = text.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        assert!(
            e.to_string()
                .contains("Zstandard frame 2 cannot be decoded"),
            "{e}"
        );
    }
}
