#!/usr/bin/env python3
"""Writes the hand-made deepseek-harness session logs of this directory from the real ones
(rc8-session.jsonl, rc8-cli-s*.jsonl): each is a real log with one thing changed, its seqs renumbered so the
log stays contiguous (`events[i].seq == i`, as the harness writes it):
python3 make_fixtures.py"""
import json
import os

os.chdir(os.path.dirname(os.path.abspath(__file__)))

REAL = [json.loads(l) for l in open("rc8-session.jsonl", encoding="utf-8")]


def renumber(lines):
    """Seqs from 0 in log order (a packed chunk row takes one per member), and the seqs
    `sourceEventSeqs` name mapped along."""
    new, seq = {}, 0
    for rec in lines[1:]:
        if "seq0" in rec:
            rec["seq0"] = seq
            seq += len(rec["data"]["texts"])
            continue
        if "seq" in rec:
            new[rec["seq"]] = seq
            rec["seq"] = seq
            seq += 1
    for rec in lines[1:]:
        if "sourceEventSeqs" in rec:
            rec["sourceEventSeqs"] = [new.get(s, s) for s in rec["sourceEventSeqs"]]
    return lines


def write(name, lines):
    with open(name, "w", encoding="utf-8") as f:
        for rec in lines:
            f.write(json.dumps(rec, separators=(",", ":"), ensure_ascii=False) + "\n")


def copy():
    return json.loads(json.dumps(REAL))


def index(lines, pred):
    return next(i for i, r in enumerate(lines) if pred(r))


def is_type(t, **data):
    return lambda r: r.get("type") == t and all(r["data"].get(k) == v for k, v in data.items())


# c1's context, injected (user/message) right after it was staged, before c2's result: a
# breach of contexts-after-all-results, visible at `events`.
log = copy()
ctx = index(log, lambda r: r.get("type") == "user/message"
            and r["data"]["content"][0]["text"] == "hook: c1 read a file")
message = log.pop(ctx)
staged = index(log, lambda r: r.get("type") == "agent/inbox/spliced"
               and r["data"].get("inserted") and r["data"]["inserted"][0]["id"] == message["data"]["id"])
log.insert(staged + 1, message)
write("context-before-results.jsonl", renumber(log))

# The exclusive write_file call c3 logged before the safe call c2's result: a breach of
# exclusive-barrier that only `--safe read_file,list_dir` can see.
log = copy()
c3 = index(log, is_type("tool/call", callId="c3"))
call = log.pop(c3)
c2_result = index(log, lambda r: r.get("type") == "tool/result"
                  and r["data"]["message"]["source"]["callId"] == "c2")
log.insert(c2_result, call)
write("barrier-breach.jsonl", renumber(log))

# An event type the harness's catalog does not list (passed over and counted), and a packed
# chunk row (a storage row the harness writes by default: passed over, not unknown).
log = copy()
c2_call = index(log, is_type("tool/call", callId="c2"))
log.insert(c2_call + 1, {"type": "tool/frobnicated", "seq": 0, "time": 1796190627555,
                         "data": {"callId": "c2"}})
done = index(log, lambda r: r.get("type") == "assistant/chunk"
             and r["data"]["chunk"].get("type") == "block-end" and r["data"]["step"] == 3)
log.insert(done, {"type": "text-chunks", "seq0": 0, "time0": 1796190627859,
                  "data": {"turn": 1, "step": 3, "index": 0, "dt": [0, 0], "texts": ["do", "n", "e"]}})
write("unknown-type.jsonl", renumber(log))

# A line that is not a session event (line 30 of the file).
log = copy()
log.insert(29, {"note": "pasted by hand"})
write("not-an-event.jsonl", renumber(log))


# From the real CLI logs (rc8-cli-s*.jsonl): hook events are the pre- and post-execute stages'.
def load(name):
    return [json.loads(l) for l in open(name, encoding="utf-8")]


def is_hook(t, handler):
    return lambda r: r.get("type") == t and r["data"].get("handlerId") == handler


# c4's PostToolUse hook (invoked and answered) moved into c5's stage, right after c5's
# tool/call: c5's post-execute would begin before its pre-execute.
log = load("rc8-cli-s2.jsonl")
hook = [log.pop(index(log, is_hook(t, "claude-code:PostToolUse:8")))
        for t in ("hook/invoked", "hook/result")]
c5 = index(log, is_type("tool/call", callId="c5"))
log[c5 + 1:c5 + 1] = hook
write("cli-s2-post-hook-in-next-call.jsonl", renumber(log))

# The answer of c4's PostToolUse hook moved into c5's stage: it comes after c4's tool/result.
log = load("rc8-cli-s2.jsonl")
answer = log.pop(index(log, is_hook("hook/result", "claude-code:PostToolUse:8")))
c5 = index(log, is_type("tool/call", callId="c5"))
log.insert(c5 + 1, answer)
write("cli-s2-hook-answer-after-result.jsonl", renumber(log))

# rc1's tool/result logged before the tool/code-dispatch of its last sub-call (rc1:code:5).
log = load("rc8-cli-s3.jsonl")
result = log.pop(index(log, lambda r: r.get("type") == "tool/result"
                       and r["data"]["message"]["source"]["callId"] == "rc1"))
last = index(log, is_type("tool/code-dispatch", subCallId="rc1:code:5"))
log.insert(last, result)
write("cli-s3-result-before-dispatch.jsonl", renumber(log))

# Fields a newer harness might add to its events: each hook event's data gets a `sessionKey`,
# each tool/result's message a `createdAt`. tep's types of them are closed, so the reader
# passes these over and counts them; the checks are those of rc8-cli-s2.jsonl.
log = load("rc8-cli-s2.jsonl")
for rec in log:
    if rec.get("type") in ("hook/invoked", "hook/result"):
        rec["data"]["sessionKey"] = "dsh-s2"
    if rec.get("type") == "tool/result":
        rec["data"]["message"]["createdAt"] = rec["time"]
write("cli-s2-added-fields.jsonl", log)

# Content blocks of other types than text, as the shipped harness writes them: its
# `read_image` tool answers with a text and an `image` block, a user may attach an image, and
# Code Mode defers a sub-call's image as a plugin message. tep keeps such blocks and reads no
# text from them; the checks are those of rc8-cli-s3.jsonl.
IMAGE = {"type": "image", "attachment": {"id": "att-0f3c", "mediaType": "image/png",
                                         "width": 2, "height": 2, "bytes": 68}}
log = load("rc8-cli-s3.jsonl")
for rec in log:
    data = rec.get("data", {})
    if rec.get("type") == "tool/result" and data["message"]["source"]["callId"] == "c7":
        data["message"]["content"][0]["content"].append(IMAGE)
    if rec.get("type") == "tool/code-dispatch" and data["subCallId"] == "rc1:code:1":
        data["content"].append(IMAGE)
    if rec.get("type") == "user/message" and data["content"][0]["text"] in (
            "run the probe scenario", "ctx_from_k1"):
        data["content"].append(IMAGE)
write("cli-s3-image-content.jsonl", log)

# A message source of a plugin's own kind (the harness's sources are merge-extensible: `goal`,
# `skill-catalog`, `subagent-report`...): the context `ctx_from_k1` (line 70) said to come
# from a `goal`. tep keeps such a source whole; the checks are those of rc8-cli-s3.jsonl.
log = load("rc8-cli-s3.jsonl")
for rec in log:
    if rec.get("type") == "user/message" and rec["data"]["content"][0]["text"] == "ctx_from_k1":
        rec["data"]["source"] = {"kind": "goal", "goalId": "goal-1", "summary": "keep going"}
write("cli-s3-plugin-source.jsonl", log)

# A log cut short inside its turn, as a session still running (or killed) leaves it: the first
# 80 lines of rc8-cli-s2.jsonl, up to c5's `tool/result`; five calls of the batch have none yet.
write("cli-s2-cut-in-batch.jsonl", load("rc8-cli-s2.jsonl")[:80])


def recovery_closers(log):
    """What deepseek-harness appends when it reloads a session whose last turn a crash left
    open (`interruptedTurnClosers`, packages/core/session/src/repair.ts): a `tool/result` for
    each call the model asked for in the open step that has none (error TOOL_OUTCOME_UNKNOWN
    citing its `tool/call` when the call started, TOOL_NOT_STARTED when it never did), then
    `step/end` and a `turn/end` of reason `interrupted`, at the last event's time."""
    turn = step = None
    asked = {}  # call id -> [step, seq of its tool/call or None], in the model's order
    for rec in log[1:]:
        kind, data = rec.get("type"), rec.get("data", {})
        if kind in ("turn/start", "turn/end"):
            turn = data["turn"] if kind == "turn/start" else None
            step = None
            asked.clear()
        elif kind == "step/start":
            step = data["step"]
        elif kind == "step/end":
            step = None
            asked.clear()
        elif kind == "assistant/message":
            for block in data["message"]["content"]:
                if block["type"] == "tool-call":
                    asked[block["id"]] = [data["step"], None]
        elif kind == "tool/call" and data["callId"] in asked:
            asked[data["callId"]][1] = rec["seq"]
        elif kind == "tool/result":
            asked.pop(data["message"]["source"]["callId"], None)
    if turn is None:
        return []
    last = log[-1]
    seq, time, out = last["seq"] + 1, last["time"], []
    for call, (in_step, call_seq) in asked.items():
        started = call_seq is not None
        text = ("The tool call was interrupted after it was recorded; its outcome is unknown."
                if started else "The tool call was interrupted before it started.")
        rec = {"type": "tool/result", "seq": seq, "time": time, "data": {
            "turn": turn, "step": in_step,
            "message": {"id": f"interrupted-tool-result-{call}-{seq}", "role": "user",
                        "source": {"kind": "tool", "callId": call},
                        "content": [{"type": "tool-result", "toolCallId": call, "isError": True,
                                     "content": [{"type": "text", "text": text}]}]},
            "error": ({"name": "ToolOutcomeUnknownError", "code": "TOOL_OUTCOME_UNKNOWN"} if started
                      else {"name": "ToolNotStartedError", "code": "TOOL_NOT_STARTED"})},
               "surfaceOp": "append"}
        if started:
            rec["sourceEventSeqs"] = [call_seq]
        out.append(rec)
        seq += 1
    if step is not None:
        out.append({"type": "step/end", "seq": seq, "time": time, "data": {"turn": turn, "step": step}})
        seq += 1
    out.append({"type": "turn/end", "seq": seq, "time": time,
                "data": {"turn": turn, "reason": {"kind": "interrupted"}}})
    return out


def next_turn(turn):
    """The session going on after a reload: rc8-cli-s4.jsonl's one turn (a new prompt spliced
    in, a batch of seven calls), as turn `turn`."""
    rest = load("rc8-cli-s4.jsonl")[4:]
    for rec in rest:
        if "turn" in rec.get("data", {}):
            rec["data"]["turn"] = turn
        # Seqs of their own until `renumber` (which maps by seq) places them after the log's.
        rec["seq"] += 10_000
        if "sourceEventSeqs" in rec:
            rec["sourceEventSeqs"] = [s + 10_000 for s in rec["sourceEventSeqs"]]
    return rest


# A session killed while c5's body ran (its PreToolUse answered), then reloaded: the harness
# closes the interrupted turn (c5 outcome unknown, s1-s4 and c6-c10 never started) and the
# session goes on with a second turn. The first 77 lines of rc8-cli-s2.jsonl, the closers,
# then rc8-cli-s4.jsonl's turn.
cut = load("rc8-cli-s2.jsonl")[:77]
write("cli-s2-crash-reloaded.jsonl", renumber(cut + recovery_closers(cut) + next_turn(2)))

# A session under context pressure, as the shipped harness compacts it before step 2's
# request: its pruner rewrites c4's long result where the model sees it (`compaction/prune`,
# then a `tool/result` of `surfaceOp` `replace` citing the original: no second outcome of c4),
# and a compaction region replaces the prompt with a summary (`compaction/start`,
# `compaction/summary`, a `user/message` of `surfaceOp` `replace`, `compaction/end`). The
# checks are those of rc8-cli-s2.jsonl.
log = load("rc8-cli-s2.jsonl")
original = log[index(log, lambda r: r.get("type") == "tool/result"
                     and r["data"]["message"]["source"]["callId"] == "c4")]
step2 = index(log, is_type("step/start", step=2))
at = step2 + 4  # after the three contexts step 2 injects
time = log[at]["time"]
rewrite = json.loads(json.dumps(original))
rewrite["data"]["message"]["content"][0]["content"] = [
    {"type": "text", "text": "c4 body re[... 40 characters pruned ...]ne"}]
rewrite.update(time=time, surfaceOp={"op": "replace", "start": original["seq"], "end": original["seq"]},
               sourceEventSeqs=[original["seq"]])
lifecycle = {"compactionId": "cmp-1", "turn": 1}
log[at:at] = [
    {"type": "compaction/prune", "seq": 0, "time": time,
     "data": {"shadowedRange": {"start": original["seq"], "end": original["seq"]},
              "shadowedSeqs": [original["seq"]], "shadowedTokenCount": 24}},
    rewrite,
    {"type": "compaction/start", "seq": 0, "time": time, "data": lifecycle},
    {"type": "compaction/summary", "seq": 0, "time": time,
     "data": {"compactionId": "cmp-1", "summary": "The user asked to run the probe scenario.",
              "shadowedRange": {"start": 7, "end": 8}, "shadowedSeqs": [7, 8], "shadowedTokenCount": 90,
              "provider": "deepseek-official", "model": "deepseek-v4-flash"}},
    {"type": "user/message", "seq": 0, "time": time, "surfaceOp": {"op": "replace", "start": 7, "end": 8},
     "sourceEventSeqs": [7, 8],
     "data": {"id": "checkpoint-cmp-1", "role": "user",
              "source": {"kind": "compaction", "compactionId": "cmp-1"},
              "content": [{"type": "text", "text": "Summary: the user asked to run the probe scenario."}]}},
    {"type": "compaction/end", "seq": 0, "time": time, "data": lifecycle},
]
write("cli-s2-compacted.jsonl", renumber(log))

# A session killed while the harness wrote a line: the first 79 lines of rc8-cli-s2.jsonl,
# then the first half of line 80 (c5's `tool/result`), with no newline. The harness drops such
# a tail when it reloads the session; tep passes it over, and the log ends inside its turn.
with open("rc8-cli-s2.jsonl", "rb") as f:
    lines = f.read().split(b"\n")
with open("cli-s2-torn-tail.jsonl", "wb") as f:
    f.write(b"\n".join(lines[:79]) + b"\n" + lines[79][:len(lines[79]) // 2])


def zstd_frames(lines, per_frame):
    """The lines as deepseek-harness's default log stores them (`session.jsonl.zstd`): the
    header alone in the first Zstandard frame, then a frame per flush (`per_frame` lines each
    here). Made with the `zstd` tool (Debian: zstd)."""
    import subprocess
    groups = [lines[:1]] + [lines[i:i + per_frame] for i in range(1, len(lines), per_frame)]
    return b"".join(subprocess.run(["zstd", "-q", "-c", "-19"], input=b"".join(g), check=True,
                                   capture_output=True).stdout for g in groups)


# rc8-cli-s2.jsonl compressed as the harness stores it by default.
with open("rc8-cli-s2.jsonl", "rb") as f:
    lines = f.read().splitlines(keepends=True)
with open("rc8-cli-s2.jsonl.zstd", "wb") as f:
    f.write(zstd_frames(lines, 10))

# A session killed while the harness wrote a frame: the frames of rc8-cli-s2.jsonl's first 79
# lines, then the first half of the frame of lines 80-89.
whole = zstd_frames(lines[:89], 10)
start = len(zstd_frames(lines[:79], 10))
with open("cli-s2-killed-in-frame.jsonl.zstd", "wb") as f:
    f.write(whole[:start + (len(whole) - start) // 2])
