#!/usr/bin/env python3
"""Prefix reuse workloads (issue 31), as ordinary OpenAI clients run them: each request sends
the whole conversation, streamed, temperature 0. perf/run-prefix starts the servers and calls
this once per workload and server; it prints one JSON object.

Arguments: WORKLOAD BASE_URL MODEL SEED, then the workload's own:
  chat   [--named]               10 turns: a 480-token system prompt, 60-word user turns,
                                 24-token replies; time to first token of each turn. --named
                                 sends only each turn's new message, in a superfluid session.
  shared USERS CONC             USERS users over the same 2,000-token system prompt, each
                                 with its own 50-token question, CONC at a time, in rounds
                                 alternating with as many questions sent alone; each one's TTFT.
  agent                          8 tool steps over a growing 3,000-token context; wall time.
  fleet  CONVS TURNS CONC        CONVS conversations of TURNS turns, interleaved, CONC at
                                 a time (the simulated engine's nodes); per-request usage.
"""
import http.client
import json
import random
import sys
import threading
import time
import urllib.parse

WORDS = ("the of and to in is that for it as was with be by on not he this are or his from at "
         "which but have an they you were her she there been one all we their has would when if "
         "so no will can more about said what out up them into other could time only some new "
         "these two may first then do any like my now over such our man me even most made after "
         "also did many before must through back years where much your way well down should "
         "because each just those people how too little state good very make world still own "
         "see men work long get here between both life being under never day same another know "
         "while last might us great old year off come since against go came right used take "
         "three river garden window letter market engine station harbor mountain winter summer "
         "morning evening kitchen table bridge forest castle village library doctor teacher "
         "farmer captain soldier painter sailor island valley desert meadow candle mirror "
         "basket ladder hammer pencil ribbon blanket pillow barrel saddle lantern compass").split()


def text(rng, n_words):
    return " ".join(rng.choice(WORDS) for _ in range(n_words))


def run_threads(target, n):
    """Runs target on n threads; the first error a thread met ends the run (a missing figure
    is not a figure)."""
    errors = []

    def guarded():
        try:
            target()
        except Exception as e:  # noqa: BLE001 - reported, then the run fails
            errors.append(e)

    ts = [threading.Thread(target=guarded) for _ in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors:
        sys.exit("prefix_bench: %s" % errors[0])


class Server:
    def __init__(self, base):
        u = urllib.parse.urlparse(base)
        self.host, self.port = u.hostname, u.port

    def chat(self, messages, max_tokens, session=None, stream=True):
        """(ttft seconds, total seconds, reply text, usage) of one chat completion."""
        body = {"model": MODEL, "messages": messages, "max_tokens": max_tokens,
                "temperature": 0, "stream": stream}
        if stream:
            body["stream_options"] = {"include_usage": True}
        headers = {"Content-Type": "application/json"}
        if session:
            headers["X-Superfluid-Session"] = session
        c = http.client.HTTPConnection(self.host, self.port, timeout=600)
        t0 = time.monotonic()
        c.request("POST", "/v1/chat/completions", json.dumps(body), headers)
        r = c.getresponse()
        if r.status != 200:
            raise RuntimeError("HTTP %d: %s" % (r.status, r.read()[:300]))
        ttft, out, usage = None, [], None
        if not stream:
            j = json.loads(r.read())
            ttft = time.monotonic() - t0
            return ttft, ttft, j["choices"][0]["message"].get("content") or "", j.get("usage")
        buf = b""
        while True:
            line = r.readline()
            if not line:
                break
            line = line.strip()
            if not line.startswith(b"data:"):
                continue
            data = line[5:].strip()
            if data == b"[DONE]":
                break
            j = json.loads(data)
            if j.get("usage"):
                usage = j["usage"]
            for ch in j.get("choices") or []:
                d = ch.get("delta") or {}
                piece = d.get("content") or d.get("reasoning_content") or ""
                if (piece or ch.get("finish_reason")) and ttft is None:
                    ttft = time.monotonic() - t0
                out.append(d.get("content") or "")
        total = time.monotonic() - t0
        c.close()
        return ttft if ttft is not None else total, total, "".join(out), usage


def cached_of(usage):
    if not usage:
        return None
    return (usage.get("prompt_tokens_details") or {}).get("cached_tokens")


def chat(base, seed, named):
    rng = random.Random(seed)
    srv = Server(base)
    system = text(rng, 470)  # about 480 tokens (Qwen2's vocabulary: a token a word, about)
    history = [{"role": "system", "content": system}]
    session = "prefix-bench-%d" % seed if named else None
    turns = []
    for k in range(10):
        user = {"role": "user", "content": text(rng, 60)}
        history.append(user)
        if named:  # the first turn sends the system message too; later ones only what is new
            msgs = history if k == 0 else [user]
        else:
            msgs = history
        ttft, total, reply, usage = srv.chat(msgs, 24, session=session)
        history.append({"role": "assistant", "content": reply})
        turns.append({"turn": k + 1, "ttft": ttft, "total": total,
                      "prompt_tokens": (usage or {}).get("prompt_tokens"),
                      "cached_tokens": cached_of(usage)})
    return {"workload": "chat", "named": named, "turns": turns}


def shared(base, seed, users, conc):
    """USERS questions after the shared system prompt and USERS alone, in alternating rounds of
    2 * CONC of a kind (CONC at a time), so that both kinds see the same machine: it is shared,
    and its load moves from minute to minute."""
    rng = random.Random(seed)
    srv = Server(base)
    system = text(rng, 1940)  # about 2,000 tokens
    questions = [text(rng, 38) + "?" for _ in range(2 * users)]  # about 50 tokens each
    out = {False: [], True: []}  # by alone
    lock = threading.Lock()
    t0 = time.monotonic()
    done = 0
    while done < users:
        for alone in (False, True):
            batch = list(range(done, min(done + 2 * conc, users)))
            nxt = [0]

            def worker():
                while True:
                    with lock:
                        if nxt[0] >= len(batch):
                            return
                        i = batch[nxt[0]]
                        nxt[0] += 1
                    msgs = [{"role": "user", "content": questions[2 * i + alone]}]
                    if not alone:
                        msgs.insert(0, {"role": "system", "content": system})
                    ttft, total, _, usage = srv.chat(msgs, 4)
                    with lock:
                        out[alone].append({"ttft": ttft,
                                           "prompt_tokens": (usage or {}).get("prompt_tokens"),
                                           "cached_tokens": cached_of(usage)})

            run_threads(worker, conc)
        done += 2 * conc
    return {"workload": "shared", "users": out[False], "alone_users": out[True],
            "wall": time.monotonic() - t0}


def agent(base, seed):
    rng = random.Random(seed)
    srv = Server(base)
    history = [{"role": "system", "content": text(rng, 700)},
               {"role": "user", "content": text(rng, 2200)}]  # about 3,000 tokens in all
    steps = []
    t0 = time.monotonic()
    for k in range(8):
        ttft, total, reply, usage = srv.chat(history, 32)
        history.append({"role": "assistant", "content": reply})
        history.append({"role": "user", "content": "Tool result: " + text(rng, 75)})
        steps.append({"step": k + 1, "ttft": ttft, "total": total,
                      "prompt_tokens": (usage or {}).get("prompt_tokens"),
                      "cached_tokens": cached_of(usage)})
    return {"workload": "agent", "steps": steps, "wall": time.monotonic() - t0}


def fleet(base, seed, convs, turns, conc):
    rng = random.Random(seed)
    srv = Server(base)
    systems = [text(rng, 100) for _ in range(8)]
    conv = []
    for i in range(convs):
        conv.append({"history": [{"role": "system", "content": rng.choice(systems)}],
                     "left": turns, "busy": False})
    order = []  # interleaved: each conversation's turns in order, conversations mixed
    for i in range(convs):
        order += [i] * turns
    rng.shuffle(order)
    lock = threading.Lock()
    cond = threading.Condition(lock)
    reqs = []
    pos = [0]

    failed = [False]

    def take():
        with cond:
            while True:
                if pos[0] >= len(order) or failed[0]:
                    return None
                # the first queued turn whose conversation is not waiting for its last reply
                for j in range(pos[0], len(order)):
                    i = order[j]
                    if i is not None and not conv[i]["busy"]:
                        order[j] = None
                        conv[i]["busy"] = True
                        while pos[0] < len(order) and order[pos[0]] is None:
                            pos[0] += 1
                        return i
                cond.wait()

    def worker():
        while True:
            i = take()
            if i is None:
                return
            c = conv[i]
            c["history"].append({"role": "user", "content": text(rng, 30)})
            try:
                ttft, total, reply, usage = srv.chat(c["history"], 16)
            except Exception:
                with cond:  # the others stop too, rather than wait for this turn
                    failed[0] = True
                    cond.notify_all()
                raise
            c["history"].append({"role": "assistant", "content": reply})
            with cond:
                c["busy"] = False
                reqs.append({"conv": i, "ttft": ttft,
                             "prompt_tokens": (usage or {}).get("prompt_tokens"),
                             "cached_tokens": cached_of(usage)})
                cond.notify_all()

    t0 = time.monotonic()
    run_threads(worker, conc)
    return {"workload": "fleet", "requests": reqs, "wall": time.monotonic() - t0}


MODEL = "m"


def main(argv):
    global MODEL
    if len(argv) < 4:
        sys.exit(__doc__)
    what, base, MODEL, seed = argv[0], argv[1], argv[2], int(argv[3])
    rest = argv[4:]
    if what == "chat":
        r = chat(base, seed, "--named" in rest)
    elif what == "shared":
        r = shared(base, seed, int(rest[0]), int(rest[1]))
    elif what == "agent":
        r = agent(base, seed)
    elif what == "fleet":
        r = fleet(base, seed, int(rest[0]), int(rest[1]), int(rest[2]))
    else:
        sys.exit(__doc__)
    json.dump(r, sys.stdout)
    print()


if __name__ == "__main__":
    main(sys.argv[1:])
