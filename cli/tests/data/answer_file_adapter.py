#!/usr/bin/env python3
"""answer_file_adapter.py FILE: an adapter that answers every `run` with the contents of FILE,
its first `SEQ` replaced by the request's seq (the memory tests' big failing answer)."""
import json
import sys

READY = {"ready": True, "protocol": 2, "implementation": {"name": "answer-file"},
         "capabilities": ["approval", "fs-gate", "parallel", "owned-events", "ui", "code-mode"],
         "specs": ["rev2"], "observation": "full"}
answer = open(sys.argv[1], "rb").read()
for line in sys.stdin.buffer:
    request = json.loads(line)
    if request["cmd"] == "start":
        sys.stdout.buffer.write(json.dumps(READY).encode() + b"\n")
    elif request["cmd"] == "run":
        sys.stdout.buffer.write(answer.replace(b"SEQ", str(request["seq"]).encode(), 1))
    else:
        break
    sys.stdout.flush()
