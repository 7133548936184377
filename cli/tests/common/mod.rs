//! What the `tep` binary's tests share: one way to start it.

// Each test binary uses its own part of this.
#![allow(dead_code)]

use std::process::{Command, Stdio};

/// The binary under test.
pub const TEP: &str = env!("CARGO_BIN_EXE_tep");

/// `tep`, without the variables that change its output: `CI` (the progress display and
/// insta), `NO_COLOR`, `CLICOLOR`, `CLICOLOR_FORCE`; stdin is empty unless the test sets it.
pub fn tep_command() -> Command {
    let mut command = Command::new(TEP);
    command
        .env_remove("CI")
        .env_remove("NO_COLOR")
        .env_remove("CLICOLOR")
        .env_remove("CLICOLOR_FORCE")
        .stdin(Stdio::null());
    command
}
