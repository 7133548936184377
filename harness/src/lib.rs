//! Driving a shipped harness through its public interfaces (`tep run --harness NAME`): tep
//! plays the model over the harness's model API ([`model_server`]), the tools as an MCP server
//! ([`mcp`]), the hooks as the harness's hook command ([`hook`]), and reads the harness's own
//! session log back as the trace ([`record`]); what tep's own records show beyond that trace is
//! [`evidence`]. What differs between harnesses is data
//! ([`profile`]); which scenarios can be driven, and the script the doubles play, is
//! [`script`]; [`driver`] runs one scenario per fresh home and workspace; [`fuzzing`] restricts
//! `tep fuzz --harness` to what can be driven; [`zstd_log`] reads a compressed session log.

pub mod clock;
pub mod driver;
pub mod evidence;
pub mod fuzzing;
pub mod hook;
pub mod mcp;
pub mod model_server;
pub mod profile;
pub mod record;
pub mod script;
pub mod zstd_log;
