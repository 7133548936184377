"""tep_adapter: a kit for writing `tep` adapters in Python (stdlib only, asyncio).

An adapter lets `tep run` drive your tool-execution pipeline through the scenario corpus. With
this kit it is glue: a `Dialect` that translates between the kit and your harness's types, and a
setup coroutine that builds your pipeline, mounts the run's scripted parts and runs the batch:

    import tep_adapter as tep

    async def setup(run: tep.Run) -> None:
        pipeline = MyPipeline(pre_execute=run.pre_listeners(), ...)
        await run.batch(pipeline.run_batch(...))

    if __name__ == "__main__":
        raise SystemExit(tep.serve(setup, MyDialect(), tep.Implementation("my-harness", ...)))

See README.md next to this package, and docs/adapter-protocol.md for the contract.
"""

from .cancel import CancelSignal, Signal, cancelled_within
from .dialect import BodyCancelledError, Cancelled, ContextOrigin, Dialect, GlueError, ProgramOutput
from .protocol import (
    PROTOCOL_VERSION,
    Adapter,
    Implementation,
    find_tep,
    log,
    run_locally,
    serve,
)
from .recorder import Recorder
from .records import (
    ALL_CAPABILITIES,
    Identity,
    ResultRecord,
    jsonable,
    text_block,
    texts_of,
)
from .scenario import Scenario, ScenarioError, compact_json, decode_scenario
from .scripts import GUARD_PROBE, CodeRun, Escaped, Run, ScriptedError, Skip

__version__ = "0.1.0"

__all__ = [
    "ALL_CAPABILITIES",
    "GUARD_PROBE",
    "PROTOCOL_VERSION",
    "Adapter",
    "BodyCancelledError",
    "CancelSignal",
    "Cancelled",
    "CodeRun",
    "ContextOrigin",
    "Dialect",
    "Escaped",
    "GlueError",
    "Identity",
    "Implementation",
    "ProgramOutput",
    "Recorder",
    "ResultRecord",
    "Run",
    "Scenario",
    "ScenarioError",
    "ScriptedError",
    "Signal",
    "Skip",
    "cancelled_within",
    "compact_json",
    "decode_scenario",
    "find_tep",
    "jsonable",
    "log",
    "run_locally",
    "serve",
    "text_block",
    "texts_of",
]
