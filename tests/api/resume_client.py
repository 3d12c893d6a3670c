#!/usr/bin/env python3
"""A streaming client that survives a head restart: it streams one completion (with --chat a
chat completion of one user message) and, when the stream breaks before [DONE], asks for the
rest with GET /v1/completions/{id} (/v1/chat/completions/{id}) and the Last-Event-ID it saw
last, again until the head answers (up to --wait seconds).

Touches --out + ".started" after its fifth event (a test waits for it before the crash).
Writes the whole text to --out and one line to stdout: `resumed=N after=K` (how often it
came back, and from which token the first time). Exit 0 when the stream ended with [DONE].
--body JSON adds its fields to the request's body (a response_format, say).
Usage: resume_client.py PORT PROMPT SEED MAX_TOKENS --out FILE [--wait S] [--chat]
       [--session NAME] [--body JSON]"""
import argparse
import http.client
import json
import sys
import time

ap = argparse.ArgumentParser()
ap.add_argument("port", type=int)
ap.add_argument("prompt")
ap.add_argument("seed", type=int)
ap.add_argument("max_tokens", type=int)
ap.add_argument("--out", required=True)
ap.add_argument("--wait", type=float, default=20.0)
ap.add_argument("--session", default=None)
ap.add_argument("--chat", action="store_true")
ap.add_argument("--body", default="{}")
a = ap.parse_args()
route = "/v1/chat/completions" if a.chat else "/v1/completions"

text = []
state = {"rid": None, "last": None, "done": False}


def read_stream(resp):
    """Reads SSE events until [DONE] or the connection breaks."""
    event_id = None
    while True:
        line = resp.fp.readline()
        if not line:
            return
        line = line.decode("utf-8").rstrip("\n")
        if line.startswith("id: "):
            event_id = line[4:]
        elif line.startswith("data: "):
            data = line[6:]
            if data == "[DONE]":
                state["done"] = True
                return
            d = json.loads(data)
            if "error" in d:
                raise SystemExit("error event: " + data)
            state["rid"] = d.get("id", state["rid"])
            for c in d.get("choices", []):
                text.append((c.get("delta") or {}).get("content") or "" if a.chat
                            else c.get("text") or "")
        elif line == "" and event_id is not None:
            state["last"] = event_id  # the event is whole: its text is ours
            state["events"] = state.get("events", 0) + 1
            if state["events"] == 5:
                open(a.out + ".started", "w").close()  # the test waits for this


def post():
    c = http.client.HTTPConnection("127.0.0.1", a.port, timeout=30)
    body = {"model": "sim-1", "seed": a.seed, "max_tokens": a.max_tokens, "stream": True}
    if a.chat:
        body["messages"] = [{"role": "user", "content": a.prompt}]
    else:
        body["prompt"] = a.prompt
    body.update(json.loads(a.body))
    headers = {"Content-Type": "application/json"}
    if a.session:
        headers["X-Superfluid-Session"] = a.session
    c.request("POST", route, json.dumps(body), headers)
    r = c.getresponse()
    if r.status != 200:
        raise SystemExit("POST: %d %s" % (r.status, r.read()[:200]))
    read_stream(r)


resumed = 0
first_after = None
try:
    post()
except (ConnectionError, http.client.HTTPException, OSError):
    pass
deadline = time.time() + a.wait
while not state["done"]:
    if state["rid"] is None:
        raise SystemExit("the stream broke before its first event: nothing to resume")
    if time.time() > deadline:
        raise SystemExit("the head did not answer again within %.0f s" % a.wait)
    try:
        c = http.client.HTTPConnection("127.0.0.1", a.port, timeout=30)
        headers = {"Last-Event-ID": state["last"]} if state["last"] else {}
        c.request("GET", route + "/" + state["rid"] + "?stream=true", headers=headers)
        r = c.getresponse()
        if r.status == 503:  # the tokenizer has not come back yet
            r.read()
            time.sleep(0.1)
            continue
        if r.status != 200:
            raise SystemExit("GET: %d %s" % (r.status, r.read()[:300]))
        resumed += 1
        if first_after is None:
            first_after = state["last"] or "0"
        read_stream(r)
    except (ConnectionError, http.client.HTTPException, OSError):
        time.sleep(0.1)
open(a.out, "w", encoding="utf-8").write("".join(text))
print("resumed=%d after=%s" % (resumed, first_after))
