#!/usr/bin/env python3
"""Runs the CI jobs of docs/ci/*.yml as a GitHub runner would, and fails when a step fails.

docs/ci.md shows these files for implementers to copy; a step that cannot run on a clean runner
is a job nobody can use. So every `run:` step of every job runs here, in order, with bash
(`bash --noprofile --norc -eo pipefail`, the runner's shell), in the job's working directory and
with the job's `env:`, in a clean environment:

- a fresh HOME (so a fresh ~/.cargo/bin, pip and npm caches, git config) and a PATH of only the
  toolchains a runner image has: the Rust toolchain's own bin (no ~/.cargo/bin of this machine,
  so no `tep` installed before), git, node and npm, /usr/bin and /bin;
- `actions/setup-python` is a fresh virtualenv first on PATH (its `python3` and `python`, its
  `pip`; nothing installed in it);
- `actions/checkout` is the job's repository: for the implementer's jobs
  (conformance*.yml) a harness repository holding `conformance/adapter.py`, the Python kit's
  example pipeline and adapter (which imports `tep_adapter`, so the job must install the kit);
  for tep's release workflow, a copy of this checkout;
- tep's git URL (`TEP_GIT`, `TEP_BRANCH`) is a local repository: a commit of this checkout as
  it is on disk (tracked and untracked files, not ignored ones), on branch `main`;
- a job that installs packages (`TEP_WHEEL`, the release workflow's `dist/`) gets the ones
  `cargo xtask dist` built (--dist, default target/dist);
- the other actions stand in as they would act: `PyO3/maturin-action` leaves the wheel of
  --dist in `dist/`, `upload-artifact` checks that its `path` holds files, `setup-node` is the
  node on PATH. An action this script does not know fails the run.

Not run: the release workflow's `publish` job (it uploads to PyPI and npm and creates a GitHub
release); this script names each step it leaves out.

The cost. `cargo install` builds `tep` in the release profile, from scratch on a fresh runner:
on 2 cores that is minutes of optimising. What this run checks is that the job installs a
working `tep`, not how fast that `tep` runs, so the install is built with the release profile's
optimisation turned off (CARGO_PROFILE_RELEASE_OPT_LEVEL=0, CARGO_PROFILE_RELEASE_CODEGEN_UNITS=256,
the dev profile's values) into a CARGO_TARGET_DIR kept in target/ci-jobs (a second run here
rebuilds only tep's own crates). Both are cargo's documented environment configuration, which
`cargo install` honours like any build; the printed environment shows them. Cargo's registry
cache is shared with this machine's (the downloaded crate files, as a runner's cache action
would restore them); the index is still asked, so this needs the network, as the runner does.

Usage: .ci/ci-jobs.py [--dist DIR] [--keep] [WORKFLOW.yml ...]   (default: docs/ci/*.yml)
Needs: Python 3 with venv and PyYAML, git, a Rust toolchain, node and npm, the network.
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parent.parent
KIT_EXAMPLE = REPO / "conformance/adapters/python/example"
# The stand-ins for tep's git URL: every job reads these names.
LOCAL_BRANCH = "main"
# What `cargo install` builds with here (see the module's docstring).
INSTALL_ENV = {
    "CARGO_PROFILE_RELEASE_OPT_LEVEL": "0",
    "CARGO_PROFILE_RELEASE_CODEGEN_UNITS": "256",
    "CARGO_TARGET_DIR": str(REPO / "target/ci-jobs"),
    "CARGO_TERM_COLOR": "never",
}
# Jobs that publish: never run here, each of their steps named as left out.
PUBLISHING_JOBS = {("release.yml", "publish")}


class JobFailed(Exception):
    pass


def say(text: str) -> None:
    print(text, flush=True)


def run(cmd: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, check=True, text=True, **kw)


def snapshot(work: Path) -> Path:
    """This checkout as it is on disk, committed on `main` in a fresh repository: tep's git URL."""
    src = work / "tep-src"
    src.mkdir()
    listed = run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
    ).stdout
    for name in filter(None, listed.split("\0")):
        source = REPO / name
        if not source.is_file():  # deleted in the work tree, or a submodule
            continue
        target = src / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)
    git = ["git", "-c", "user.name=ci-jobs", "-c", "user.email=ci-jobs@localhost", "-c", "commit.gpgsign=false"]
    run(["git", "init", "--quiet", "--initial-branch", LOCAL_BRANCH], cwd=src)
    run([*git, "add", "--all"], cwd=src)
    run([*git, "commit", "--quiet", "--message", "this checkout, for .ci/ci-jobs.py"], cwd=src)
    return src


def which_dir(tool: str) -> str:
    found = shutil.which(tool)
    if found is None:
        raise SystemExit(f"ci-jobs: {tool} is not on PATH (needed to stand in for a runner)")
    return str(Path(found).parent)


def clean_env(work: Path) -> dict[str, str]:
    """A runner's environment: a fresh HOME and a PATH of the toolchains only."""
    home = work / "home"
    cargo_home = home / ".cargo"
    cargo_home.mkdir(parents=True)
    real_cargo_home = Path(os.environ.get("CARGO_HOME") or Path.home() / ".cargo")
    if (real_cargo_home / "registry").is_dir():
        os.symlink(real_cargo_home / "registry", cargo_home / "registry")
    sysroot = run(["rustc", "--print", "sysroot"], capture_output=True).stdout.strip()
    toolchain = Path(sysroot) / "bin"
    if not (toolchain / "cargo").exists():
        raise SystemExit(f"ci-jobs: no cargo in the toolchain's {toolchain}")
    path: list[str] = []
    for directory in [
        str(cargo_home / "bin"),  # where `cargo install` puts binaries; on a runner's PATH too
        str(toolchain),
        which_dir("git"),
        which_dir("node"),
        which_dir("npm"),
        "/usr/bin",
        "/bin",
    ]:
        if directory not in path:
            path.append(directory)
    env = {
        "HOME": str(home),
        "PATH": os.pathsep.join(path),
        "LANG": "C.UTF-8",
        "CI": "true",
        "GITHUB_ACTIONS": "true",
        "RUNNER_TEMP": str(work / "runner-temp"),
        **INSTALL_ENV,
    }
    (work / "runner-temp").mkdir()
    found = shutil.which("tep", path=env["PATH"])
    if found:  # the jobs must install it themselves
        raise SystemExit(f"ci-jobs: tep is already on the clean PATH ({found})")
    return env


def one(dist: Path, pattern: str) -> Path:
    found = sorted(dist.glob(pattern))
    if len(found) != 1:
        raise SystemExit(f"ci-jobs: expected one {pattern} in {dist}, found {len(found)} (run cargo xtask dist)")
    return found[0]


def checkout(workflow: str, dest: Path, tep_src: Path) -> None:
    """What `actions/checkout` gives the job: the repository the workflow lives in."""
    if workflow.startswith("conformance"):
        # A harness's repository, with an adapter at conformance/adapter.py that imports the kit
        # (the kit's own example, without the kit beside it).
        shutil.copytree(KIT_EXAMPLE, dest / "conformance", ignore=shutil.ignore_patterns("__pycache__"))
        if (dest / "tep_adapter").exists() or (dest / "conformance/tep_adapter").exists():
            raise SystemExit("ci-jobs: the harness checkout must not hold the kit")
    else:
        shutil.copytree(tep_src, dest, ignore=shutil.ignore_patterns(".git"), dirs_exist_ok=True)


def uses(step: dict[str, Any], env: dict[str, str], cwd: Path, job_dir: Path, dist: Path, failed: bool) -> str:
    """Stands in for an action; returns what it did, or raises JobFailed."""
    action = str(step["uses"]).split("@")[0]
    with_ = step.get("with") or {}
    if action == "actions/checkout":
        return "the checkout is prepared"
    if action == "actions/setup-python":
        venv = job_dir / "python"
        run([sys.executable, "-m", "venv", str(venv)])
        env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env['PATH']}"
        return f"a fresh virtualenv first on PATH ({venv}), for python-version {with_.get('python-version', '?')}"
    if action == "actions/setup-node":
        return "node and npm are on PATH"
    if action == "PyO3/maturin-action":
        out = (cwd / str(with_.get("working-directory", ".")) / "../dist").resolve()
        out.mkdir(parents=True, exist_ok=True)
        wheel = one(dist, "tep_conformance-*.whl")
        shutil.copy2(wheel, out / wheel.name)
        return f"{wheel.name} (from --dist) into {out}"
    if action == "actions/upload-artifact":
        pattern = str(with_.get("path", ""))
        files = [p for p in glob.glob(str(cwd / pattern), recursive=True)]
        files = [f for f in files if Path(f).is_file() or any(Path(f).rglob("*"))]
        if not files:
            # GitHub only warns (if-no-files-found: warn); after a failed step that is expected,
            # but a job that passed promised its reports.
            if failed:
                return f"warning: nothing at {pattern!r} (an earlier step failed)"
            raise JobFailed(f"upload-artifact: nothing at {pattern!r}")
        return f"{pattern} holds files"
    raise JobFailed(f"ci-jobs does not know how to stand in for the action {action}")


def run_job(
    workflow: str, job_name: str, job: dict[str, Any], base_env: dict[str, str], work: Path, tep_src: Path, dist: Path
) -> list[str]:
    """Runs one job's steps; returns the names of the steps it ran. Raises JobFailed."""
    job_dir = work / f"{Path(workflow).stem}-{job_name}"
    repo = job_dir / "checkout"
    repo.mkdir(parents=True)
    checkout(workflow, repo, tep_src)
    env = dict(base_env)
    for key, value in (job.get("env") or {}).items():
        env[str(key)] = str(value)
    # Where the job names tep's source or packages, the local ones stand in.
    if "TEP_GIT" in env:
        env["TEP_GIT"] = f"file://{tep_src}"
        env["TEP_BRANCH"] = LOCAL_BRANCH
    if "TEP_WHEEL" in env:
        env["TEP_WHEEL"] = str(one(dist, "tep_conformance-*.whl"))
    env["GITHUB_WORKSPACE"] = str(repo)
    ran: list[str] = []
    failed: list[str] = []
    for index, step in enumerate(job.get("steps") or [], start=1):
        title = step.get("name") or step.get("uses") or f"step {index}"
        if failed and "always()" not in str(step.get("if", "")):
            say(f"  - {title}: not run (an earlier step failed)")
            continue
        cwd = repo / str(step.get("working-directory", "."))
        try:
            if "uses" in step:
                say(f"  - {title}: {uses(step, env, repo, job_dir, dist, bool(failed))}")
            elif "run" in step:
                if "${{" in str(step["run"]):
                    raise JobFailed("its script has a ${{ }} expression, which this stand-in cannot expand")
                say(f"  - {title}\n    $ " + str(step["run"]).rstrip().replace("\n", "\n    $ "))
                step_env = dict(env)
                for key, value in (step.get("env") or {}).items():
                    step_env[str(key)] = str(value)
                script = job_dir / f"step-{index}.sh"
                script.write_text(str(step["run"]))
                done = subprocess.run(
                    ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
                    cwd=cwd,
                    env=step_env,
                    stdout=sys.stdout,
                    stderr=subprocess.STDOUT,
                )
                if done.returncode != 0:
                    raise JobFailed(f"exit status {done.returncode}")
            ran.append(str(title))
        except JobFailed as error:
            say(f"    FAILED: {title}: {error}")
            failed.append(f"{workflow} job {job_name}, step {title!r}: {error}")
    if failed:
        raise JobFailed("\n  ".join(failed))
    return ran


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dist", type=Path, default=REPO / "target/dist", help="the packages of cargo xtask dist")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    parser.add_argument("workflows", nargs="*", type=Path, help="default: docs/ci/*.yml")
    args = parser.parse_args()
    workflows = args.workflows or sorted((REPO / "docs/ci").glob("*.yml"))
    dist = args.dist.resolve()
    work = Path(tempfile.mkdtemp(prefix="tep-ci-jobs."))
    failures: list[str] = []
    try:
        tep_src = snapshot(work)
        base_env = clean_env(work)
        say("ci-jobs: the clean environment")
        for key in sorted(base_env):
            say(f"  {key}={base_env[key]}")
        for path in workflows:
            workflow = yaml.safe_load(path.read_text())
            for job_name, job in (workflow.get("jobs") or {}).items():
                say(f"\n==> ci-jobs: {path.name}, job {job_name}")
                if (path.name, job_name) in PUBLISHING_JOBS:
                    for step in job.get("steps") or []:
                        say(f"  - {step.get('name') or step.get('uses') or step.get('run')}: left out (it publishes)")
                    continue
                try:
                    run_job(path.name, job_name, job, base_env, work, tep_src, dist)
                    say(f"  passed: {path.name}, job {job_name}")
                except JobFailed as error:
                    failures.append(str(error))
    finally:
        if args.keep:
            say(f"ci-jobs: kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    if failures:
        say("\nci-jobs: FAILED:\n  " + "\n  ".join(failures))
        return 1
    say(f"\nci-jobs: every step of {', '.join(p.name for p in workflows)} ran")
    return 0


if __name__ == "__main__":
    sys.exit(main())
