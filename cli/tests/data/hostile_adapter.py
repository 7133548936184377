#!/usr/bin/env python3
"""A hostile adapter for cli/tests/attack2.rs (issue 28): terminal escapes in every string it
controls, a forged PASS line, and (by MODE) a helper daemon, a hang or a big failing answer.

MODE (argv[1]):
  text       ready with an escaped name; runs answer errored / skipped / garbage in turn, each
             carrying the payloads (stderr too)
  handshake  writes the payloads to stderr and answers start with garbage
  hang-start starts a child (`sleep 600`), writes both pids to $PIDFILE, never answers start
  hang-run N answers through `$TEP reference-adapter`; on its Nth run starts a child, writes
             both pids to $PIDFILE (appending) and hangs
  daemon     double-forks a helper (in a session of its own) at start, answers through the
             reference, and answers `errored` if the helper is gone: a well-behaved adapter
             (but it crashes on the scenario $CRASH_ON)
  zombies    answers through the reference; every run double-forks a helper that exits at once
"""
import json
import os
import subprocess
import sys
import time

ESC = "\x1b"
PAYLOADS = (
    ESC + "]0;PWNED-TITLE\x07"                      # window title
    + ESC + "[2J" + ESC + "[H"                      # clear the screen
    + "\r" + ESC + "[1A" + ESC + "[2K"              # erase the line above
    + ESC + "]8;;https://evil.example/" + ESC + "\\click-me" + ESC + "]8;;" + ESC + "\\"
    + "\r PASS [  0.001s] forged"                   # a forged PASS line
    + "\u009b31mC1-CSI" + "\x07" + ESC + "[31mRED"
)
MODE = sys.argv[1] if len(sys.argv) > 1 else "text"
ARG = int(sys.argv[2]) if len(sys.argv) > 2 else 1


def record_pids(*pids):
    with open(os.environ["PIDFILE"], "a") as f:
        f.write("".join("%d\n" % p for p in pids))


def hang_with_a_child():
    child = subprocess.Popen(["sleep", "600"], stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    record_pids(os.getpid(), child.pid)
    while True:
        time.sleep(60)


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def double_fork(then):
    """Runs `then` in a grandchild in a session of its own; returns its pid."""
    r, w = os.pipe()
    if os.fork() == 0:
        os.setsid()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            os.close(w)
            for fd in (0, 1, 2):
                os.dup2(os.open(os.devnull, os.O_RDWR), fd)
            then()
            os._exit(0)
        os.write(w, b"%d" % pid)
        os._exit(0)
    os.close(w)
    pid = int(os.read(r, 32))
    os.close(r)
    os.wait()
    return pid


def proxy():
    """Answers every request through the reference adapter; MODE adds its fault."""
    ref = subprocess.Popen([os.environ["TEP"], "reference-adapter"], stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE)
    helper = double_fork(lambda: time.sleep(600)) if MODE == "daemon" else None
    if helper:
        record_pids(helper)
    runs = 0
    for line in sys.stdin.buffer:
        request = json.loads(line)
        if request["cmd"] == "run":
            runs += 1
            if MODE == "hang-run" and runs == ARG:
                hang_with_a_child()
            if MODE == "zombies":
                double_fork(lambda: None)
            if MODE == "daemon" and request["scenario"]["id"] == os.environ.get("CRASH_ON"):
                os._exit(1)
            if helper and not alive(helper):
                send({"seq": request["seq"], "errored": {"message": "helper %d was killed" % helper}})
                continue
        ref.stdin.write(line)
        ref.stdin.flush()
        if request["cmd"] == "stop":
            break
        sys.stdout.buffer.write(ref.stdout.readline())
        sys.stdout.flush()


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


if MODE in ("hang-run", "daemon", "zombies"):
    proxy()
    sys.exit(0)
n = 0
for line in sys.stdin:
    request = json.loads(line)
    if request["cmd"] == "start":
        if MODE == "hang-start":
            hang_with_a_child()
        if MODE == "handshake":
            sys.stderr.write("stderr" + PAYLOADS + "\n")
            sys.stderr.flush()
            print("not ready", flush=True)
            continue
        send({"ready": True, "protocol": 2,
              "implementation": {"name": "evil" + PAYLOADS, "version": "v" + PAYLOADS,
                                 "language": "L" + PAYLOADS}})
    elif request["cmd"] == "stop":
        break
    else:
        n += 1
        seq = request["seq"]
        if n % 3 == 1:
            send({"seq": seq, "errored": {"message": "errmsg" + PAYLOADS}})
        elif n % 3 == 2:
            send({"seq": seq, "skipped": {"reason": "skipreason" + PAYLOADS}})
        else:
            sys.stderr.write("stderr-tail" + PAYLOADS + "\n")
            sys.stderr.flush()
            print("garbage" + PAYLOADS, flush=True)
