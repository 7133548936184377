"""The adapter protocol (version 3): the loop on stdin/stdout, and running one scenario locally.

`serve(setup, dialect, ...)` is an adapter's whole `main`. With no arguments it speaks the
protocol: it answers `start` with `ready`, each `run` with a trace, a skip, an error or an escape
(echoing `seq`), and exits on `stop`. Nothing but protocol reaches stdout: file descriptor 1 is
pointed at stderr for the adapter's lifetime, so a stray `print()` (or a child process) cannot
break the stream. Each scenario runs in a fresh event loop.

Before it answers, the kit checks what it can of the adapter's own glue, so a mistake there is
answered `errored` with a message that names the kit method to call, instead of a trace judged
for it: a trace that does not start with the batch (`run.recorder.on_model`), a dialect method a
scenario needs and the dialect lacks, a kit coroutine the pipeline never awaited (a synchronous
hook: mount the `sync=True` form), a value that is not JSON (named by its field). Nothing an
adapter records can make the answer unsendable.

With `--scenario ID-or-FILE` it runs one scenario locally, prints its trace (JSON Lines) and the
verdict of `tep check` on it, when a `tep` binary is found (`--tep`, `$TEP_BIN`, or `PATH`).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import traceback
import warnings
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

from .dialect import Dialect
from .recorder import Spec
from .records import Capability, ObservationLevel, Record
from .scenario import Json, ScenarioError, decode_scenario
from .scripts import _RUNNING, Escaped, Run, Skip

PROTOCOL_VERSION = 3

Setup = Callable[[Run], Awaitable[Any]]
"""Your adapter: builds a fresh pipeline for `run`, mounts the run's scripts, and awaits the batch
through `run.batch(...)`."""


@dataclass(frozen=True)
class Implementation:
    """What `ready` says about your pipeline."""

    name: str
    version: str | None = None
    language: str = "Python"
    homepage: str | None = None
    capabilities: tuple[Capability, ...] = ()
    specs: tuple[Spec, ...] = ("rev2",)
    observation: ObservationLevel = "hooks"
    extra: Mapping[str, Json] = field(default_factory=dict)

    def ready(self) -> dict[str, Json]:
        implementation: dict[str, Json] = {"name": self.name, "language": self.language}
        if self.version is not None:
            implementation["version"] = self.version
        if self.homepage is not None:
            implementation["homepage"] = self.homepage
        return {
            "ready": True,
            "protocol": PROTOCOL_VERSION,
            "implementation": implementation,
            "capabilities": list(self.capabilities),
            "specs": list(self.specs),
            "observation": self.observation,
            **self.extra,
        }

    def header(self, spec: Spec) -> Record:
        return {
            "kind": "header",
            "spec": spec,
            "implementation": self.name,
            "capabilities": list(self.capabilities),
            "observation": self.observation,
        }


def log(message: str) -> None:
    """A line on stderr (`tep` keeps the last 8 KiB and shows it when a scenario errors)."""
    print(f"[tep_adapter] {message}", file=sys.stderr, flush=True)


class Adapter:
    """Answers protocol requests by running your setup on each scenario."""

    def __init__(
        self, setup: Setup, dialect: Dialect, implementation: Implementation, collect_garbage: bool = False
    ) -> None:
        self.setup = setup
        self.dialect = dialect
        self.implementation = implementation
        self.collect_garbage = collect_garbage  # a full collection after each scenario: see `serve`

    def handle(self, request: Mapping[str, Json]) -> dict[str, Json] | None:
        """The answer to one request, or None for `stop`."""
        cmd = request.get("cmd")
        if cmd == "start":
            if request.get("protocol") not in (None, PROTOCOL_VERSION):
                log(f"tep speaks protocol {request.get('protocol')}; this kit speaks {PROTOCOL_VERSION}")
            return self.implementation.ready()
        if cmd == "run":
            seq = request.get("seq")
            try:
                answer = self.run(request.get("scenario", {}), request.get("spec", "rev2"))
            except Exception as error:  # the kit's own failure: still an answer to this seq
                answer = {"errored": {"message": f"{type(error).__name__}: {error}", "context": traceback.format_exc()}}
            return {"seq": seq, **answer}
        if cmd == "stop":
            return None
        raise ValueError(f"unknown command {cmd!r}")

    def run(self, raw: Mapping[str, Json], spec: Spec = "rev2") -> dict[str, Json]:
        """Runs one scenario in a fresh event loop: the body of a `run` answer (no `seq`)."""
        if spec not in self.implementation.specs:
            return {
                "skipped": {"reason": f"this adapter implements {', '.join(self.implementation.specs)}, not {spec}"}
            }
        try:
            scenario = decode_scenario(raw)
        except (ScenarioError, AttributeError, TypeError) as error:
            return {"errored": {"message": f"cannot decode the scenario: {error}"}}
        run = Run(scenario, self.dialect, spec)
        running = _RUNNING.set(run)  # the event loop's tasks inherit it: where a Skip notes itself
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", RuntimeWarning)
                answer = asyncio.run(self._run(run))
                # A coroutine nobody awaited warns when it is freed: at once, by reference
                # counting, unless a reference cycle holds it; only then does it take a
                # collection to be found.
                if self.collect_garbage:
                    gc.collect()
        finally:
            _RUNNING.reset(running)
        if run.skip_requested is not None:  # whatever the pipeline did with the exception
            return {"skipped": {"reason": run.skip_requested}}
        for warning in caught:
            hint = _unawaited_hint(str(warning.message))
            if hint is not None:
                run.fail(hint)
            else:
                warnings.showwarning(warning.message, warning.category, warning.filename, warning.lineno)
        return checked(run, answer)

    async def _run(self, run: Run) -> dict[str, Json]:
        header = self.implementation.header(run.spec)
        try:
            await self.setup(run)
            await run.settle()
        except Skip as skip:
            return {"skipped": {"reason": str(skip) or "the adapter skipped it"}}
        except Escaped as escaped:
            return {"escaped": {"message": str(escaped), "trace": [header, *run.trace()]}}
        except Exception as error:
            return {"errored": {"message": f"{type(error).__name__}: {error}", "context": traceback.format_exc()}}
        return {"trace": [header, *run.trace()]}

    def serve(self, stdin: Iterable[str] | None = None, stdout: IO[str] | None = None) -> int:
        """The protocol loop: one JSON request per line in, one answer per line out."""
        out = stdout if stdout is not None else _claim_stdout()
        for line in stdin if stdin is not None else sys.stdin:
            if not line.strip():
                continue
            try:
                request = json.loads(line)
                answer = self.handle(request)
            except Exception as error:  # a request we cannot read has no seq to answer with
                log(f"ignored a request: {type(error).__name__}: {error}")
                continue
            if answer is None:
                break
            try:
                line = json.dumps(answer, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
            except (TypeError, ValueError) as error:  # never a dead process: say why instead
                seq = answer.get("seq")
                line = json.dumps({"seq": seq, "errored": {"message": f"the answer cannot be sent: {error}"}})
            out.write(line + "\n")
            out.flush()
        return 0


_UNAWAITED = re.compile(r"coroutine '(?:tep_adapter:(?P<form>[^']*)|Run\.(?P<method>body|program))' was never awaited")


def _unawaited_hint(warning: str) -> str | None:
    """What to do about a kit coroutine the pipeline never awaited, or None (not the kit's)."""
    found = _UNAWAITED.search(warning)
    if found is None:
        return None
    if found["method"] is not None:
        return f"your pipeline called run.{found['method']} without awaiting it: it is a coroutine function"
    form = found["form"]
    if form in ("run.pre_listeners()", "run.post_listeners()", "run.approval()", "run.guards()"):
        return (
            f"your pipeline called what {form} made without awaiting it: that hook of yours is synchronous, "
            f"so mount {form[:-1]}sync=True) instead"
        )
    return f"your pipeline called what {form} made without awaiting it: that hook of yours must await it"


def checked(run: Run, answer: dict[str, Json]) -> dict[str, Json]:
    """`answer`, unless the kit found a mistake of the adapter's glue, or the answer would not
    encode as JSON: then an `errored` answer that says what to fix."""
    if "skipped" in answer:
        return _sendable(answer)
    problems = run.problems
    if problems:
        others = "" if len(problems) == 1 else f" (and {len(problems) - 1} more, below)"
        # The context adds what the message does not say (tep prints `message (context)`): the
        # other problems, and what the run itself raised; never the message alone again.
        context = "\n".join(problems) if len(problems) > 1 else ""
        if "errored" in answer:
            context += ("\n\n" if context else "") + str(answer["errored"].get("message", ""))
        errored: dict[str, Json] = {"message": problems[0] + others}
        if context:
            errored["context"] = context
        return {"errored": errored}
    trace = answer.get("trace")
    if isinstance(trace, list):
        records = trace[1:]  # after the header
        if not records:
            return {"errored": {"message": "nothing was recorded: " + _ON_MODEL}}
        first = records[0]
        if not (first.get("kind") == "stage" and first.get("node") == "model"):
            message = f"a record before the first model observation ({_described(first)}): {_ON_MODEL}"
            return {"errored": {"message": message}}
    return _sendable(answer)


_ON_MODEL = (
    "call run.recorder.on_model(calls) when the batch starts, before anything else is recorded, e.g. "
    "run.recorder.on_model((c.call_id, c.tool) for c in run.scenario.calls)"
)


def _described(record: Any) -> str:
    """A record in a few words: `stage final, call c1`."""
    if not isinstance(record, Mapping):
        return f"a {type(record).__name__}"
    kind = record.get("kind")
    what = record.get("node") or record.get("mark")
    if kind == "event" and isinstance(record.get("event"), Mapping):
        what = record["event"].get("type")
    call = record.get("call")
    return f"{kind} {what}" + (f", call {call}" if call is not None else "")


def _sendable(answer: dict[str, Json]) -> dict[str, Json]:
    """`answer` if it encodes as JSON, else an `errored` answer naming the first value that
    does not: its record and field (`trace[7] (stage final, call c1): result.content[0]`)."""
    try:
        json.dumps(answer, allow_nan=False)
        return answer
    except (TypeError, ValueError):
        pass
    body = answer.get("escaped", answer)
    trace = body.get("trace") if isinstance(body, Mapping) else None
    found: tuple[str, Any] | None = None
    for i, record in enumerate(trace if isinstance(trace, list) else ()):
        inner = _unencodable(record)
        if inner is not None:
            found = (f"trace[{i}] ({_described(record)}): {inner[0] or 'the record'}", inner[1])
            break
    found = found or _unencodable(answer) or ("the answer", None)
    where, value = found
    return {
        "errored": {
            "message": f"the answer cannot be sent: {where} is not JSON (a {type(value).__name__!r} value; "
            "the kit records plain JSON: make your dialect and the data you record give dicts, lists, "
            "strings, finite numbers, booleans or None)",
            "context": repr(value)[:500],
        }
    }


def _unencodable(value: Any, path: str = "") -> tuple[str, Any] | None:
    """The field (`result.content[0]`) and value of the first part of `value` that `json.dumps`
    refuses, or None."""
    if value is None or isinstance(value, (str, bool, int)):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else (path, value)
    if isinstance(value, dict):
        for key, item in value.items():
            if not (key is None or isinstance(key, (str, int, float, bool))):
                return f"{path} key {key!r}".strip(), key
            found = _unencodable(item, f"{path}.{key}" if path else str(key))
            if found is not None:
                return found
        return None
    if isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            found = _unencodable(item, f"{path}[{i}]")
            if found is not None:
                return found
        return None
    return path, value


def _claim_stdout() -> IO[str]:
    """The protocol's own handle on stdout; fd 1 itself now goes to stderr."""
    sys.stdout.flush()
    protocol_fd = os.dup(1)
    os.dup2(2, 1)
    return os.fdopen(protocol_fd, "w", encoding="utf-8", newline="\n")


def find_tep(explicit: str | None = None) -> str | None:
    """A `tep` binary: `explicit` (as given), else $TEP_BIN, else `tep` on PATH, if executable."""
    if explicit:
        return explicit
    return shutil.which(os.environ.get("TEP_BIN") or "tep")


def load_scenario(ref: str, tep: str | None) -> dict[str, Json]:
    """A scenario from a JSON file, or by id from the corpus (`tep scenarios show ID`)."""
    if os.path.exists(ref):
        with open(ref, encoding="utf-8") as f:
            loaded: dict[str, Json] = json.load(f)
            return loaded
    if tep is None:
        raise SystemExit(f"{ref} is not a file, and no tep binary was found to look it up (--tep or $TEP_BIN)")
    shown = subprocess.run([tep, "scenarios", "show", ref], capture_output=True, text=True, check=False)
    if shown.returncode != 0:
        raise SystemExit(f"tep scenarios show {ref}: {shown.stderr.strip()}")
    found: dict[str, Json] = json.loads(shown.stdout)
    return found


def run_locally(adapter: Adapter, ref: str, spec: Spec, tep: str | None, out: IO[str]) -> int:
    """Runs one scenario, prints its trace and `tep check`'s verdict. Exit status: tep's, or 0."""
    answer = adapter.run(load_scenario(ref, tep), spec)
    trace = answer.get("trace") or answer.get("escaped", {}).get("trace")
    if trace is None:
        out.write(json.dumps(answer, indent=2) + "\n")
        return 0 if "skipped" in answer else 1
    lines = "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in trace)
    out.write(lines)
    if "escaped" in answer:
        out.write(f"# escaped: {answer['escaped']['message']}\n")
    if tep is None:
        out.write("# no tep binary found (--tep, $TEP_BIN or PATH): trace not checked\n")
        return 0
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False, encoding="utf-8") as f:
        f.write(lines)
    try:
        checked = subprocess.run([tep, "check", f.name], capture_output=True, text=True, check=False)
    finally:
        os.unlink(f.name)
    out.write(checked.stdout + checked.stderr)
    if not os.path.exists(ref):
        out.write(f"# for the expected outcome too: {tep} run --adapter '<this adapter>' --scenario {ref}\n")
    return checked.returncode


def serve(
    setup: Setup,
    dialect: Dialect,
    implementation: Implementation,
    argv: Sequence[str] | None = None,
    collect_garbage: bool = False,
) -> int:
    """An adapter's main: the protocol loop, or `--scenario ID-or-FILE` to run one locally.

    `collect_garbage=True` runs a full garbage collection after every scenario, so that a kit
    coroutine your pipeline never awaited is reported even when a reference cycle keeps it alive
    (without it, such a one is found only if Python's own collector runs during the scenario).
    It costs 2 to 4 ms a scenario; an unawaited coroutine held by no cycle is reported either way.
    """
    parser = argparse.ArgumentParser(description=f"tep adapter for {implementation.name}")
    parser.add_argument("--scenario", help="run one scenario (an id of the corpus or a JSON file) and check it")
    parser.add_argument("--spec", default=implementation.specs[0], choices=["rev1", "rev2"])
    parser.add_argument("--tep", help="the tep binary (default: $TEP_BIN, else tep on PATH)")
    args = parser.parse_args(argv)
    adapter = Adapter(setup, dialect, implementation, collect_garbage)
    if args.scenario is None:
        return adapter.serve()
    return run_locally(adapter, args.scenario, args.spec, find_tep(args.tep), sys.stdout)
