//! `cargo xtask dist`: the packages an implementer installs instead of a Rust toolchain and a
//! clone, built into `target/dist/`:
//!
//! - a Python wheel, `tep_conformance-*.whl`, built by maturin from `cli/pyproject.toml`
//!   (`bindings = "bin"`, the ruff/uv pattern): it installs the `tep` binary on the
//!   virtualenv's PATH and the Python adapter kit (`import tep_adapter`) together;
//! - the TypeScript adapter kit, `tep-adapter-*.tgz` (`npm pack`), with its types; it finds
//!   `tep` through `TEP_BIN` or on PATH.
//!
//! The wheel's binary is built with a cargo profile (`--profile`, release by default). CI passes
//! `--profile dev`: it reuses the debug build the tests made, where a release build would take
//! minutes more on two cores; the wheel is then larger and slower, which a smoke test does not mind.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

/// What `cargo xtask dist` was asked for.
#[derive(Debug, Clone)]
pub struct DistOptions {
    /// The repository root.
    pub root: PathBuf,
    /// Where the packages go (default `target/dist`).
    pub out: PathBuf,
    /// The cargo profile of the wheel's `tep` binary (`release`, `dev`, …).
    pub profile: String,
}

/// A step that went wrong, with what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum DistError {
    #[error("cannot start {program}: {source} ({hint})")]
    Start {
        program: String,
        hint: &'static str,
        source: std::io::Error,
    },
    #[error("`{command}` failed ({status})")]
    Failed { command: String, status: String },
    #[error("cannot prepare {}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// One command of the build: a program, its arguments and where it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    pub program: OsString,
    pub args: Vec<OsString>,
    pub dir: PathBuf,
    /// Printed when the program cannot be started.
    pub hint: &'static str,
}

impl Step {
    fn display(&self) -> String {
        let mut words = vec![self.program.to_string_lossy().into_owned()];
        words.extend(self.args.iter().map(|a| a.to_string_lossy().into_owned()));
        words.join(" ")
    }
}

/// The commands that build the packages, in order.
pub fn steps(options: &DistOptions) -> Vec<Step> {
    let maturin = std::env::var_os("MATURIN").unwrap_or_else(|| "maturin".into());
    let npm = std::env::var_os("NPM").unwrap_or_else(|| "npm".into());
    let out: OsString = options.out.clone().into_os_string();
    vec![
        Step {
            program: maturin,
            args: [
                "build".into(),
                "--locked".into(),
                "--profile".into(),
                options.profile.clone().into(),
                "--out".into(),
                out.clone(),
            ]
            .into(),
            dir: options.root.join("cli"),
            hint: "pip install maturin, or set MATURIN=path/to/maturin",
        },
        Step {
            program: npm,
            args: [
                "pack".into(),
                "--silent".into(),
                "--pack-destination".into(),
                out,
            ]
            .into(),
            dir: options.root.join("conformance/adapters/typescript"),
            hint: "install Node.js with npm, or set NPM=path/to/npm",
        },
    ]
}

/// The packages a previous build left in `out` (a wheel or a tarball), which a new build
/// replaces so that `target/dist/*.whl` names one file.
pub fn stale_packages(out: &Path) -> std::io::Result<Vec<PathBuf>> {
    let entries = match std::fs::read_dir(out) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut stale = Vec::new();
    for entry in entries {
        let path = entry?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let ours = (name.starts_with("tep_conformance-") && name.ends_with(".whl"))
            || (name.starts_with("tep-adapter-") && name.ends_with(".tgz"));
        if ours {
            stale.push(path);
        }
    }
    stale.sort();
    Ok(stale)
}

/// Builds both packages into `options.out`; returns the packages it holds afterwards.
pub fn build(options: &DistOptions) -> Result<Vec<PathBuf>, DistError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| DistError::Io { path, source }
    };
    std::fs::create_dir_all(&options.out).map_err(io(&options.out))?;
    for old in stale_packages(&options.out).map_err(io(&options.out))? {
        std::fs::remove_file(&old).map_err(io(&old))?;
    }
    for step in steps(options) {
        eprintln!("==> {}", step.display());
        let status = Command::new(&step.program)
            .args(&step.args)
            .current_dir(&step.dir)
            .status()
            .map_err(|source| DistError::Start {
                program: step.program.to_string_lossy().into_owned(),
                hint: step.hint,
                source,
            })?;
        if !status.success() {
            return Err(DistError::Failed {
                command: step.display(),
                status: status.to_string(),
            });
        }
    }
    stale_packages(&options.out).map_err(io(&options.out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(out: &Path) -> DistOptions {
        DistOptions {
            root: PathBuf::from("/repo"),
            out: out.to_path_buf(),
            profile: "dev".to_owned(),
        }
    }

    #[test]
    fn the_wheel_is_built_from_cli_with_the_profile_and_the_tarball_from_the_kit() {
        let steps = steps(&options(Path::new("/repo/target/dist")));
        assert_eq!(steps.len(), 2);
        assert_eq!(steps[0].dir, PathBuf::from("/repo/cli"));
        assert_eq!(
            steps[0].display().split_once(' ').map(|(_, a)| a),
            Some("build --locked --profile dev --out /repo/target/dist")
        );
        assert_eq!(
            steps[1].dir,
            PathBuf::from("/repo/conformance/adapters/typescript")
        );
        assert_eq!(
            steps[1].display().split_once(' ').map(|(_, a)| a),
            Some("pack --silent --pack-destination /repo/target/dist")
        );
    }

    #[test]
    fn only_our_old_packages_are_stale() {
        let dir = std::env::temp_dir().join(format!("xtask-dist-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for name in [
            "tep_conformance-0.1.0-py3-none-manylinux_2_34_x86_64.whl",
            "tep-adapter-0.1.0.tgz",
            "other-1.0.whl",
            "notes.txt",
        ] {
            std::fs::write(dir.join(name), "").unwrap();
        }
        let stale: Vec<String> = stale_packages(&dir)
            .unwrap()
            .iter()
            .filter_map(|p| p.file_name()?.to_str().map(str::to_owned))
            .collect();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(
            stale,
            [
                "tep-adapter-0.1.0.tgz",
                "tep_conformance-0.1.0-py3-none-manylinux_2_34_x86_64.whl"
            ]
        );
        assert!(stale_packages(&dir).unwrap().is_empty());
    }
}
