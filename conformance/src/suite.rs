//! The suite's identity, carried by every report and by `tep --version`: its version and a hash
//! of the scenario corpus embedded in the binary (computed at run time from the embedded files,
//! so it names exactly the scenarios this binary runs).

use sha2::{Digest, Sha256};

use crate::scenario::corpus_files;

/// The suite's version (the `tep-conformance` crate's).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// `sha256:<hex>` over the embedded scenario files in name order: for each, its file name, a
/// newline, its length in bytes, a newline, and its bytes.
pub fn corpus_hash() -> String {
    let mut hasher = Sha256::new();
    for (name, text) in corpus_files() {
        hasher.update(name.as_bytes());
        hasher.update(format!("\n{}\n", text.len()).as_bytes());
        hasher.update(text.as_bytes());
    }
    format!("sha256:{:x}", hasher.finalize())
}

/// What `tep --version` prints after the program name.
pub fn long_version() -> String {
    format!(
        "{VERSION} (corpus {}, {} scenarios)",
        corpus_hash(),
        corpus_files().len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_corpus_hash_is_a_sha256_of_the_embedded_files() {
        let hash = corpus_hash();
        let hex = hash.strip_prefix("sha256:").unwrap_or_default();
        assert_eq!(hex.len(), 64, "{hash}");
        assert!(hex.chars().all(|c| c.is_ascii_hexdigit()));
        assert_eq!(hash, corpus_hash(), "stable");
    }
}
