#!/usr/bin/env python3
"""A node's death under streams (perf/run-recovery's second part, issue 32).

  recovery_kill.py HEAD_PORT NODE_A_PID NODE_A_PORT NODE_B_PORT STREAMS MAX_TOKENS

STREAMS clients stream POST /v1/completions (sim-1, greedy, MAX_TOKENS) through the head at
HEAD_PORT, each timing its events. Once every stream has had 10 tokens, node A (NODE_A_PID) is
killed (SIGKILL) while node B is up and idle enough to take its sessions. For each stream
whose session was on node A (as many as /v1/fleet says it held: the longest gaps across the
kill), the gap is the time from its last event before the kill to its first after; beside it, in the same run, the streams' own inter-token
times before the kill (the baseline). Prints one line:
  KILL streams=.. on_victim=.. gap_p50_ms=.. gap_p99_ms=.. gap_max_ms=.. itl_p50_ms=..
       itl_p99_ms=.. keepalives=.. whole=..
"""
import http.client
import json
import os
import signal
import sys
import threading
import time

port, victim_pid = int(sys.argv[1]), int(sys.argv[2])
n, max_tokens = int(sys.argv[5]), int(sys.argv[6])
events = [[] for _ in range(n)]  # (time, kind) per stream
lock = threading.Lock()
ok = [False] * n
keepalives = [0] * n


def stream(i):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    body = {"model": "sim-1", "prompt": "story %d" % i, "max_tokens": max_tokens, "seed": i,
            "temperature": 0, "stream": True}
    c.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        return
    while True:
        line = r.fp.readline()
        if not line:
            break
        line = line.decode("utf-8", "replace").rstrip("\n")
        now = time.monotonic()
        if line.startswith(": keep-alive"):
            keepalives[i] += 1
        elif line == "data: [DONE]":
            ok[i] = True
            break
        elif line.startswith("data: "):
            with lock:
                events[i].append(now)


threads = [threading.Thread(target=stream, args=(i,)) for i in range(n)]
for t in threads:
    t.start()
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    with lock:
        if all(len(e) >= 10 for e in events):
            break
    time.sleep(0.01)
# How many of the streams node A holds (the head's own count, /v1/fleet).
c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
c.request("GET", "/v1/fleet")
fleet = json.loads(c.getresponse().read())
held = sum(e.get("sessions", 0) for e in fleet.get("nodes", [])
           if e.get("node", "").endswith(":" + sys.argv[3]))
t_kill = time.monotonic()
os.kill(victim_pid, signal.SIGKILL)
for t in threads:
    t.join()


def pct(v, p):
    if not v:
        return 0.0
    v = sorted(v)
    return v[min(len(v) - 1, int(p / 100.0 * len(v)))]


gaps, itl = [], []
for e in events:
    before = [t for t in e if t < t_kill]
    after = [t for t in e if t >= t_kill]
    itl += [b - a for a, b in zip(before, before[1:])]
    if before and after:
        gaps.append(after[0] - before[-1])
# The streams on the killed node: the `held` longest gaps (theirs crossed the move).
on_victim = sorted(gaps)[len(gaps) - held:] if held else []
print("KILL streams=%d on_victim=%d gap_p50_ms=%.1f gap_p99_ms=%.1f gap_max_ms=%.1f "
      "itl_p50_ms=%.1f itl_p99_ms=%.1f keepalives=%d whole=%d"
      % (n, len(on_victim), 1000 * pct(on_victim, 50), 1000 * pct(on_victim, 99),
         1000 * max(on_victim or [0]), 1000 * pct(itl, 50), 1000 * pct(itl, 99),
         sum(keepalives), sum(ok)))
