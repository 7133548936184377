//! Harness profiles: what differs between harnesses, as data (one TOML file per harness in
//! `harness/profiles/`, embedded in the binary; `docs/harness-profiles.md` explains each key).

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

/// The profiles `tep` knows, by name: (name, TOML text).
const BUILT_IN: &[(&str, &str)] = &[
    (
        "deepseek-harness",
        include_str!("../profiles/deepseek-harness.toml"),
    ),
    (
        "deepseek-harness-source",
        include_str!("../profiles/deepseek-harness-source.toml"),
    ),
];

/// How to start one harness and where to find what it records.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    pub name: String,
    pub description: String,
    /// The command, found on `PATH` unless the user names another.
    pub command: String,
    /// Its arguments, with placeholders (see [`Placeholders`]).
    pub args: Vec<String>,
    /// Environment variables set for it, with placeholders.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// The task the harness is given.
    pub task: String,
    pub overlay: OverlaySpec,
    pub model: ModelSpec,
    pub tools: ToolsSpec,
    pub hooks: HooksSpec,
    pub log: LogSpec,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OverlaySpec {
    /// The file name the overlay is written to, in the run directory.
    pub file: String,
    pub template: String,
    /// Inserted as `{hooks_rows}` when the scenario scripts hooks.
    #[serde(default)]
    pub hooks_row: String,
    /// Inserted as `{pool_cap_rows}` when the scenario caps the parallel pool (`{max_parallel}`
    /// stands for the cap); empty: the harness has no pool cap tep can set.
    #[serde(default)]
    pub pool_cap_row: String,
    /// Inserted as `{safe_tool_rows}` when the scenario's concurrency-safe tools declare no
    /// timeout the scenario applies.
    #[serde(default)]
    pub safe_tool_row: String,
    /// Inserted as `{safe_tool_rows}` instead when they share one timeout a `timeout` wrapper
    /// applies (`{timeout_ms}` stands for it); empty: such a timeout cannot be set.
    #[serde(default)]
    pub safe_tool_timeout_row: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ModelDialect {
    /// DeepSeek's (OpenAI-style) chat completions, streamed as SSE.
    DeepseekChatCompletions,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelSpec {
    pub dialect: ModelDialect,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolsSpec {
    /// What the harness puts before an MCP tool's name (`mcp__tep__`).
    pub prefix: String,
    /// The tools the harness ships.
    #[serde(default)]
    pub shipped: Vec<String>,
    /// Which of them are concurrency-safe (the session log does not say; its reader needs it).
    #[serde(default)]
    pub concurrency_safe: Vec<String>,
    /// The shipped concurrency-safe tool that plays a scenario's concurrency-safe tools, whose
    /// backend tep's model server plays; absent: such scenarios are not applicable.
    #[serde(default)]
    pub safe: Option<SafeToolSpec>,
}

/// A shipped concurrency-safe tool whose backend tep plays: each call of a scenario's
/// concurrency-safe tool becomes a call of it whose arguments name the call.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SafeToolSpec {
    /// The shipped tool's name (`web_search`).
    pub tool: String,
    /// How the backend receives the call: its dialect.
    pub backend: BackendDialect,
    /// The text that names one call (`{call}`: its id); the backend finds the call by it.
    pub query: String,
    /// The call's arguments, as JSON (`{query}`: the text above).
    pub arguments: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BackendDialect {
    /// An Anthropic Messages search (`POST {base}/messages`, a `web_search_20250305` server
    /// tool): the query is the text of the first user message; the answer holds one
    /// `web_search_tool_result`; an HTTP 500 is a failure.
    AnthropicMessagesSearch,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HookDialect {
    /// The installed harness has no hook bridge.
    None,
    /// Claude Code's `hooks.json`: a command per event, the payload on stdin.
    ClaudeCode,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HooksSpec {
    pub dialect: HookDialect,
    /// The file name the hooks configuration is written to, in the run directory.
    pub file: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Compression {
    None,
    Zstd,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LogReader {
    /// `tep_check::deepseek_harness`.
    DeepseekHarness,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogSpec {
    /// Where the log lands, relative to the harness's home: `*` matches one path component.
    pub glob: String,
    pub compression: Compression,
    pub reader: LogReader,
}

/// Why a profile could not be had.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error("no harness profile named `{name}`; known: {known}")]
    Unknown { name: String, known: String },
    #[error("cannot read the profile {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("the profile {path} is not valid: {message}")]
    Invalid { path: String, message: String },
}

impl Profile {
    /// A built-in profile, or the profile in the TOML file at `name` when it names a file.
    pub fn load(name: &str) -> Result<Profile, ProfileError> {
        if let Some((_, text)) = BUILT_IN.iter().find(|(n, _)| *n == name) {
            return Profile::parse(name, text);
        }
        let path = Path::new(name);
        if name.ends_with(".toml") || path.is_file() {
            let text = std::fs::read_to_string(path).map_err(|source| ProfileError::Read {
                path: name.to_owned(),
                source,
            })?;
            return Profile::parse(name, &text);
        }
        Err(ProfileError::Unknown {
            name: name.to_owned(),
            known: Profile::built_in().join(", "),
        })
    }

    /// The names of the built-in profiles.
    pub fn built_in() -> Vec<&'static str> {
        BUILT_IN.iter().map(|(n, _)| *n).collect()
    }

    pub fn parse(path: &str, text: &str) -> Result<Profile, ProfileError> {
        toml::from_str(text).map_err(|e| ProfileError::Invalid {
            path: path.to_owned(),
            message: e.to_string(),
        })
    }
}

/// The values a profile's placeholders (`{name}`) stand for in one run.
#[derive(Debug, Clone, Default)]
pub struct Placeholders(pub BTreeMap<&'static str, String>);

impl Placeholders {
    /// `text` with every known `{name}` replaced; unknown braces are left alone (YAML flow
    /// mappings use braces too).
    pub fn fill(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for (name, value) in &self.0 {
            out = out.replace(&format!("{{{name}}}"), value);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_built_in_profile_parses() {
        for name in Profile::built_in() {
            let profile = Profile::load(name).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(profile.name, name);
        }
    }

    #[test]
    fn an_unknown_profile_names_the_known_ones() {
        let e = Profile::load("no-such-harness").unwrap_err();
        assert!(e.to_string().contains("deepseek-harness"), "{e}");
    }

    #[test]
    fn placeholders_fill_known_names_and_leave_yaml_braces() {
        let p = Placeholders([("port", "8080".to_owned())].into_iter().collect());
        assert_eq!(p.fill("{a: {port}}"), "{a: 8080}");
    }
}
