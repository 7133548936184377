#!/usr/bin/env python3
"""peak_rss.py OUT COMMAND...: runs COMMAND (stdin, stdout and stderr its own), then writes to
OUT the most memory it held at once (the maximum resident set size of the waited-for children,
in KiB, from getrusage(2)) and its exit code. The memory tests (cli/tests/it/memory.rs) measure
`tep` with it: a measure of what the kernel saw, not a timed assertion."""
import json
import resource
import subprocess
import sys

out, command = sys.argv[1], sys.argv[2:]
code = subprocess.call(command)
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
with open(out, "w") as f:
    json.dump({"peak_kib": peak, "exit": code}, f)
