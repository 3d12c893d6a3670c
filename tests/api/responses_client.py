#!/usr/bin/env python3
"""The checks of responses.sh against a head: POST /v1/responses whole and streamed, beside
the chat completion of the same conversation (the same prompt, the same reply), its typed
events in order, tools and reasoning in a model's own markup (a node with --sim-script on and
a real template), previous_response_id continuing a stored response's conversation (its
latest) or replaying it up to an earlier response (a fork: the reply of the same items sent
fresh), GET / DELETE /v1/responses/{id} by key, and the 400s naming what it does not do.

  responses_client.py PORT MODE [KEY] [OTHER_KEY]
MODE: plain (the simulated engine's ChatML), qwen3 (Qwen3's template, scripted replies),
bounds (a conversation past the turns kept), store (GET, DELETE, keys; needs --wal-dir and
two keys), restart-1 / restart-2 (a stored
response before a head restart, continued and fetched after it; state in $RESP_STATE).
Prints "ok NAME" / "FAIL NAME: why" lines; exit 1 on a failure."""
import http.client
import json
import os
import sys

port, mode = int(sys.argv[1]), sys.argv[2]
keys = sys.argv[3:]
fails = 0


def check(name, cond, why=""):
    global fails
    if cond:
        print("ok   " + name)
    else:
        fails += 1
        print("FAIL %s: %s" % (name, why))


def call(method, path, body=None, key=None, stream=False):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    h = {"Content-Type": "application/json"}
    k = key if key is not None else (keys[0] if keys else None)
    if k:
        h["Authorization"] = "Bearer " + k
    c.request(method, path, json.dumps(body) if body is not None else None, h)
    r = c.getresponse()
    if stream and r.status == 200:
        return r.status, events(r)
    data = r.read()
    try:
        return r.status, json.loads(data)
    except ValueError:
        return r.status, data


def events(r):
    """[(event, data)] of an SSE stream: each event's `event:` line and its data."""
    out, name = [], None
    for raw in r:
        line = raw.decode("utf-8").rstrip("\n")
        if line.startswith("event: "):
            name = line[7:]
        elif line.startswith("data: "):
            d = json.loads(line[6:])
            out.append((name, d))
            name = None
    return out


def respond(body, key=None):
    return call("POST", "/v1/responses", body, key)


def chat(messages, **kw):
    body = {"model": MODEL, "messages": messages, **kw}
    return call("POST", "/v1/chat/completions", body)


def text_of(resp):
    return "".join(p["text"] for it in resp.get("output", []) if it["type"] == "message"
                   for p in it["content"] if p["type"] == "output_text")


def stream_text(evs):
    return "".join(d["delta"] for n, d in evs if n == "response.output_text.delta")


def event_order_ok(evs):
    """created, in_progress first (in progress, no incomplete_details yet); completed (or
    incomplete) last; sequence numbers 0.. in order; every item added (in progress, holding
    nothing yet: what it holds comes as deltas) before its deltas and done after them."""
    names = [n for n, _ in evs]
    if names[:2] != ["response.created", "response.in_progress"]:
        return "starts with %s" % names[:2]
    for _, d in evs[:2]:
        if d["response"]["status"] != "in_progress" or d["response"]["incomplete_details"]:
            return "%s: %s" % (d["type"], d["response"])
    for n, d in evs:
        it = d.get("item", {})
        if n == "response.output_item.added" and (
                it["status"] != "in_progress" or it.get("arguments") or
                any(c.get("text") for c in it.get("content", []))):
            return "an item added with content: %s" % it
    if names[-1] not in ("response.completed", "response.incomplete"):
        return "ends with %s" % names[-1]
    if [d["sequence_number"] for _, d in evs] != list(range(len(evs))):
        return "sequence numbers out of order"
    if any(d.get("type") != n for n, d in evs):
        return "an event's type is not its name"
    added, done = set(), set()
    for n, d in evs:
        if n == "response.output_item.added":
            added.add(d["output_index"])
        elif n == "response.output_item.done":
            if d["output_index"] not in added:
                return "item %d done before added" % d["output_index"]
            done.add(d["output_index"])
        elif "delta" in n and d["output_index"] not in added - done:
            return "%s outside its item" % n
    if added != done:
        return "items added and not done: %s" % (added - done)
    return ""


MODEL = "sim-1"
SAMPLE = {"temperature": 0, "max_output_tokens": 40}

if mode == "plain":
    s, r = respond({"model": MODEL, "input": "Hello there", **SAMPLE})
    s2, c = chat([{"role": "user", "content": "Hello there"}], temperature=0, max_tokens=40)
    check("a string input: the chat completion's reply and prompt",
          s == 200 and r["object"] == "response" and r["id"].startswith("resp_") and
          text_of(r) == c["choices"][0]["message"]["content"] and
          r["usage"]["input_tokens"] == c["usage"]["prompt_tokens"] and
          r["usage"]["output_tokens"] == c["usage"]["completion_tokens"] and
          r["usage"]["total_tokens"] == r["usage"]["input_tokens"] + r["usage"]["output_tokens"],
          "%s %s / %s" % (s, json.dumps(r)[:300], json.dumps(c)[:200]))
    first_in = r["usage"]["input_tokens"]
    check("its fields: status, model, store, echoed parameters",
          r.get("status") in ("completed", "incomplete") and r["model"] == MODEL and
          r["store"] is True and r["max_output_tokens"] == 40 and r["temperature"] == 0 and
          r["tools"] == [] and r["previous_response_id"] is None and r["error"] is None,
          json.dumps(r)[:400])
    s, r = respond({"model": MODEL, "instructions": "Be brief.",
                    "input": [{"role": "user", "content": [{"type": "input_text", "text": "Hi"},
                                                           {"type": "input_text", "text": "there"}]}],
                    **SAMPLE})
    s2, c = chat([{"role": "system", "content": "Be brief."},
                  {"role": "user", "content": "Hi\nthere"}], temperature=0, max_tokens=40)
    check("instructions and input_text parts: the chat of a system message and joined text",
          s == 200 and text_of(r) == c["choices"][0]["message"]["content"] and
          r["usage"]["input_tokens"] == c["usage"]["prompt_tokens"] and
          r["instructions"] == "Be brief.", json.dumps(r)[:300])
    s, evs = call("POST", "/v1/responses", {"model": MODEL, "input": "Hello there", "stream": True,
                                            **SAMPLE}, stream=True)
    s2, whole = respond({"model": MODEL, "input": "Hello there", **SAMPLE})
    last = evs[-1][1]["response"] if evs else {}
    check("streamed: created, in_progress, the item's events, completed, in order",
          s == 200 and not event_order_ok(evs), event_order_ok(evs) if s == 200 else s)
    check("streamed: the deltas make the whole response's text; the last event holds it all",
          stream_text(evs) == text_of(whole) and text_of(last) == text_of(whole) and
          last["usage"]["output_tokens"] == whole["usage"]["output_tokens"],
          "%r / %r" % (stream_text(evs)[:80], text_of(whole)[:80]))
    names = [n for n, _ in evs]
    check("streamed: a message item's events (content_part added/done, output_text done)",
          all(x in names for x in ("response.output_item.added", "response.content_part.added",
                                   "response.output_text.delta", "response.output_text.done",
                                   "response.content_part.done", "response.output_item.done")),
          names)
    s, r = respond({"model": MODEL, "input": "Hello there", "max_output_tokens": 3,
                    "temperature": 0})
    check("max_output_tokens reached: status incomplete, reason max_output_tokens",
          s == 200 and r["status"] == "incomplete" and
          r["incomplete_details"] == {"reason": "max_output_tokens"} and
          r["usage"]["output_tokens"] == 3, json.dumps(r)[:300])
    # What it does not do: 400s naming the field.
    for body, param in [
        ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]},
         "input[0].content[0].type"),
        ({"input": "x", "tools": [{"type": "web_search"}]}, "tools[0].type"),
        ({"input": "x", "text": {"format": {"type": "json_schema"}}}, "text.format.schema"),
        ({"input": "x", "text": {"format": {"type": "json_schema", "name": "s", "schema": {"not": {}}}}},
         "text.format.schema.not"),
        ({"input": "x", "background": True}, "background"),
        ({"input": "x", "truncation": "auto"}, "truncation"),
        ({"input": "x", "reasoning": {"summary": "auto"}}, "reasoning.summary"),
        ({"input": 5}, "input"),
        ({}, "input"),
        ({"input": "x", "previous_response_id": "resp_nothing"}, "previous_response_id"),
    ]:
        s, r = respond({"model": MODEL, **body})
        got = r.get("error", {}).get("param") if isinstance(r, dict) else None
        check("%s: %s naming %s" % (json.dumps(body)[:60], s, param),
              s in (400, 404) and got == param, "%s %s" % (s, json.dumps(r)[:200]))
    # previous_response_id: the stored response's conversation continues on its node.
    s, r1 = respond({"model": MODEL, "input": "My name is Ada.", **SAMPLE})
    # input_tokens: the follow-up's prompt counted before it runs, the conversation included;
    # the count neither takes the conversation nor stores anything.
    s, cnt = call("POST", "/v1/responses/input_tokens",
                  {"model": MODEL, "input": "What is my name?", "previous_response_id": r1["id"]})
    s0, cnt0 = call("POST", "/v1/responses/input_tokens", {"model": MODEL, "input": "Hello there",
                                                           "stream": True})
    s, r2 = respond({"model": MODEL, "input": "What is my name?", "previous_response_id": r1["id"],
                     **SAMPLE})
    check("input_tokens: the follow-up's input tokens, counted before it on the stored "
          "conversation; a first turn's its own",
          s == 200 and cnt.get("object") == "response.input_tokens" and
          cnt.get("input_tokens") == r2["usage"]["input_tokens"] and s0 == 200 and
          cnt0 == {"object": "response.input_tokens", "input_tokens": first_in},
          "%s %s / %s; %s %s" % (s, cnt, r2.get("usage"), s0, cnt0))
    sg, e = call("GET", "/v1/responses/input_tokens")
    check("GET /v1/responses/input_tokens: 405", sg == 405, "%s %s" % (sg, e))
    s3, c = chat([{"role": "user", "content": "My name is Ada."},
                  {"role": "assistant", "content": text_of(r1)},
                  {"role": "user", "content": "What is my name?"}], temperature=0, max_tokens=40)
    check("previous_response_id: the whole conversation's prompt, its node's context reused",
          s == 200 and r2["previous_response_id"] == r1["id"] and
          r2["usage"]["input_tokens"] == c["usage"]["prompt_tokens"] and
          text_of(r2) == c["choices"][0]["message"]["content"] and
          r2["usage"]["input_tokens_details"]["cached_tokens"] >= r1["usage"]["input_tokens"],
          "%s %s / %s" % (s, json.dumps(r2)[:300], json.dumps(c["usage"])))
    s, r3 = respond({"model": MODEL, "input": "Thanks.", "previous_response_id": r2["id"],
                     **SAMPLE})
    check("... the latest continued again: a third turn", s == 200 and
          r3["usage"]["input_tokens_details"]["cached_tokens"] >= r2["usage"]["input_tokens"],
          json.dumps(r3)[:300])
    # A fork: previous_response_id naming the first of the three replays turn 1 only, as a
    # new conversation: the reply and prompt of the same items sent fresh, the shared prefix
    # reused from the node's prefix cache.
    turn1 = [{"role": "user", "content": "My name is Ada."}] + r1["output"]
    s, cnt = call("POST", "/v1/responses/input_tokens",
                  {"model": MODEL, "input": "And again?", "previous_response_id": r1["id"]})
    s, f1 = respond({"model": MODEL, "input": "And again?", "previous_response_id": r1["id"],
                     **SAMPLE})
    s2, fresh = respond({"model": MODEL, "input": turn1 + [{"role": "user", "content": "And again?"}],
                         **SAMPLE})
    check("a fork from the first of three responses: turn 1's context only, the reply of the "
          "same items sent fresh, counted alike by input_tokens",
          s == 200 and s2 == 200 and f1["previous_response_id"] == r1["id"] and
          f1["usage"]["input_tokens"] == fresh["usage"]["input_tokens"] and
          r1["usage"]["input_tokens"] < f1["usage"]["input_tokens"] < r2["usage"]["input_tokens"] + 8 and
          f1["usage"]["input_tokens"] < r3["usage"]["input_tokens"] and
          text_of(f1) == text_of(fresh) and cnt.get("input_tokens") == f1["usage"]["input_tokens"],
          "%s %s / %s / %s" % (s, json.dumps(f1)[:300], json.dumps(fresh.get("usage")), cnt))
    print("info fork of response 1 of 3: input_tokens %s (cached %s); response 3's %s" % (
        f1["usage"]["input_tokens"], f1["usage"]["input_tokens_details"]["cached_tokens"],
        r3["usage"]["input_tokens"]))
    check("... the shared prefix reused (usage.input_tokens_details.cached_tokens)",
          f1["usage"]["input_tokens_details"]["cached_tokens"] >= r1["usage"]["input_tokens"],
          json.dumps(f1.get("usage")))
    s, fi = respond({"model": MODEL, "instructions": "Be brief.", "input": "And again?",
                     "previous_response_id": r1["id"], **SAMPLE})
    s2, fresh = respond({"model": MODEL, "instructions": "Be brief.",
                         "input": turn1 + [{"role": "user", "content": "And again?"}], **SAMPLE})
    check("... with instructions: first, as in the same items sent fresh",
          s == 200 and s2 == 200 and text_of(fi) == text_of(fresh) and
          fi["usage"]["input_tokens"] == fresh["usage"]["input_tokens"] > f1["usage"]["input_tokens"] and
          fi["instructions"] == "Be brief.", "%s %s / %s" % (s, json.dumps(fi)[:300], json.dumps(fresh)[:200]))
    s, evs = call("POST", "/v1/responses", {"model": MODEL, "input": "And again?", "stream": True,
                                            "previous_response_id": r1["id"], **SAMPLE}, stream=True)
    last = evs[-1][1]["response"] if s == 200 and evs else {}
    check("... streamed: the same reply, its events in order",
          s == 200 and not event_order_ok(evs) and stream_text(evs) == text_of(f1) and
          last.get("previous_response_id") == r1["id"], "%s %s" % (s, str(evs)[:300]))
    s, f2 = respond({"model": MODEL, "input": "Once more.", "previous_response_id": f1["id"],
                     **SAMPLE})
    check("the fork is a conversation of its own: its latest continued",
          s == 200 and f2["id"][:21] == f1["id"][:21] and f1["id"][:21] != r1["id"][:21] and
          f2["usage"]["input_tokens_details"]["cached_tokens"] >= f1["usage"]["input_tokens"],
          "%s %s" % (s, json.dumps(f2)[:300]))
    s, ff = respond({"model": MODEL, "input": "Last one.", "previous_response_id": f1["id"],
                     **SAMPLE})
    s2, fresh = respond({"model": MODEL, "input": turn1 + [{"role": "user", "content": "And again?"}] +
                         f1["output"] + [{"role": "user", "content": "Last one."}], **SAMPLE})
    check("a fork of a fork: turn 1 and the fork's turn, the reply of the same items fresh",
          s == 200 and s2 == 200 and text_of(ff) == text_of(fresh) and
          ff["usage"]["input_tokens"] == fresh["usage"]["input_tokens"],
          "%s %s / %s" % (s, json.dumps(ff)[:300], json.dumps(fresh)[:200]))
    s, r = respond({"model": MODEL, "input": "x", "previous_response_id": r1["id"],
                    "max_output_tokens": 2, "text": {"format": {"type": "json_object"}}})
    print("info a fork with text.format json_object: %s %s" % (s, json.dumps(r)[:200]))
    check("a fork takes its own text.format (its conversation's first response had none)",
          s == 200, "%s %s" % (s, r))
    # GET without a log: the shard's last stored responses, as they were answered.
    s, g = call("GET", "/v1/responses/" + r2["id"])
    s2, g2 = call("GET", "/v1/responses/" + r1["id"] + "?stream=false")
    check("GET /v1/responses/{id} without a log: the response as answered (an earlier one too)",
          s == 200 and g == r2 and s2 == 200 and g2 == r1, "%s %s" % (s, json.dumps(g)[:300]))
    s, g = call("GET", "/v1/responses/" + r2["id"] + "?stream=true")
    check("... streamed again without a log: 404 (the events come from the log)", s == 404,
          "%s %s" % (s, json.dumps(g)[:300]))
    # An earlier reply named by its item id (what @ai-sdk/openai sends when store is on).
    ref = {"type": "item_reference", "id": r1["output"][0]["id"]}
    s, r4 = respond({"model": MODEL, "input": [{"role": "user", "content": "My name is Ada."}, ref,
                                              {"role": "user", "content": "What is my name?"}],
                     **SAMPLE})
    check("item_reference to a stored response's message: the conversation with its text",
          s == 200 and r4["usage"]["input_tokens"] == c["usage"]["prompt_tokens"] and
          text_of(r4) == c["choices"][0]["message"]["content"], "%s %s" % (s, json.dumps(r4)[:300]))
    s, e = respond({"model": MODEL, "input": [{"type": "item_reference", "id": "msg_00_0"}]})
    check("an item_reference to no kept item: 404 naming input[0].id",
          s == 404 and e["error"]["param"] == "input[0].id", "%s %s" % (s, e))
    s, r = respond({"model": MODEL, "input": "Forget me.", "store": False, **SAMPLE})
    s2, r4 = respond({"model": MODEL, "input": "x", "previous_response_id": r["id"]})
    check("store false: not continued (404)", s == 200 and r["store"] is False and s2 == 404,
          "%s %s" % (s2, json.dumps(r4)[:200]))

elif mode == "bounds":
    # A conversation keeps its first 256 responses' turns: a fork from the 257th is a 400
    # saying so (naming previous_response_id); from the 256th it is served; the latest goes on.
    s, r = respond({"model": MODEL, "input": "a", "max_output_tokens": 1})
    ids = [r["id"]]
    for i in range(256):
        s, r = respond({"model": MODEL, "input": "a", "max_output_tokens": 1,
                        "previous_response_id": ids[-1]})
        if s != 200:
            break
        ids.append(r["id"])
    s, r = respond({"model": MODEL, "input": "b", "max_output_tokens": 1,
                    "previous_response_id": ids[-1]})
    s1, f = respond({"model": MODEL, "input": "b", "max_output_tokens": 1,
                     "previous_response_id": ids[255]})
    s2, e = respond({"model": MODEL, "input": "b", "max_output_tokens": 1,
                     "previous_response_id": ids[256]})
    check("257 responses: the latest continued, a fork from the 256th served, from the 257th "
          "a 400 naming previous_response_id and the bound",
          len(ids) == 257 and s == 200 and s1 == 200 and s2 == 400 and
          e["error"]["param"] == "previous_response_id" and "256 responses" in e["error"]["message"],
          "%d %s %s %s %s" % (len(ids), s, s1, s2, json.dumps(e)[:300]))

elif mode == "qwen3":
    MODEL = "sim-1"
    tools = [{"type": "function", "name": "get_weather", "description": "The weather",
              "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                             "required": ["city"]}}]
    say = lambda reply: "Weather?\nsim-reply: " + json.dumps(reply).replace("<", "\\u003c")
    call_markup = ('<think>\nI should look.\n</think>\n\n<tool_call>\n{"name": "get_weather", '
                   '"arguments": {"city": "Paris"}}\n</tool_call>')
    s, r = respond({"model": MODEL, "input": say(call_markup), "tools": tools})
    kinds = [it["type"] for it in r.get("output", [])] if s == 200 else []
    fc = [it for it in r.get("output", []) if it["type"] == "function_call"] if s == 200 else []
    rs = [it for it in r.get("output", []) if it["type"] == "reasoning"] if s == 200 else []
    check("reasoning then a call: a reasoning item, then a function_call item",
          kinds == ["reasoning", "function_call"] and fc[0]["name"] == "get_weather" and
          json.loads(fc[0]["arguments"]) == {"city": "Paris"} and
          fc[0]["call_id"].startswith("call_") and
          rs[0]["content"][0] == {"type": "reasoning_text", "text": "I should look."} and
          r["usage"]["output_tokens_details"]["reasoning_tokens"] > 0,
          "%s %s" % (s, json.dumps(r)[:500]))
    s, evs = call("POST", "/v1/responses", {"model": MODEL, "input": say(call_markup),
                                            "tools": tools, "stream": True}, stream=True)
    names = [n for n, _ in evs]
    args = "".join(d["delta"] for n, d in evs if n == "response.function_call_arguments.delta")
    reasoning = "".join(d["delta"] for n, d in evs if n == "response.reasoning_text.delta")
    check("streamed: reasoning_text deltas, then the call's arguments deltas and done",
          s == 200 and not event_order_ok(evs) and reasoning == "I should look." and
          json.loads(args) == {"city": "Paris"} and
          "response.function_call_arguments.done" in names,
          "%s %s %r" % (event_order_ok(evs) if s == 200 else s, names, reasoning))
    # The call's result as input, continuing the stored response.
    s, r2 = respond({"model": MODEL, "previous_response_id": r["id"], "tools": tools,
                     "input": [{"type": "function_call_output", "call_id": fc[0]["call_id"] if fc else "x",
                                "output": "21 C, clear"},
                               {"role": "user", "content": say("It is 21 C and clear.")}]})
    check("function_call_output continuing it: the reply", s == 200 and
          text_of(r2) == "It is 21 C and clear." and r2["status"] == "completed",
          "%s %s" % (s, json.dumps(r2)[:300]))
    # The same conversation as items (no previous response): the same reply.
    s, r3 = respond({"model": MODEL, "tools": tools, "input": [
        {"role": "user", "content": say(call_markup)},
        {"type": "reasoning", "id": "rs_1", "summary": [],
         "content": [{"type": "reasoning_text", "text": "I should look."}]},
        {"type": "function_call", "call_id": "call_1", "name": "get_weather",
         "arguments": "{\"city\": \"Paris\"}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "21 C, clear"},
        {"role": "user", "content": say("It is 21 C and clear.")}]})
    check("the same as items: reasoning, function_call and its output given back",
          s == 200 and text_of(r3) == "It is 21 C and clear.", "%s %s" % (s, json.dumps(r3)[:300]))

elif mode == "store":
    k1, k2 = keys[0], keys[1]
    s, r1 = respond({"model": MODEL, "input": "Hello there", **SAMPLE}, key=k1)
    s, g = call("GET", "/v1/responses/" + r1["id"], key=k1)
    check("GET /v1/responses/{id}: the same response", s == 200 and g["id"] == r1["id"] and
          text_of(g) == text_of(r1) and g["usage"] == r1["usage"], "%s %s" % (s, json.dumps(g)[:300]))
    s, g = call("GET", "/v1/responses/" + r1["id"] + "?stream=true", key=k1, stream=True)
    done = [d for n, d in g if n in ("response.completed", "response.incomplete")] if s == 200 else []
    check("GET ?stream=true: its events again from the log, the same response last",
          s == 200 and done and text_of(done[0]["response"]) == text_of(r1), "%s %s" % (s, g))
    s, g = call("GET", "/v1/responses/" + r1["id"], key=k2)
    check("... another key: 404", s == 404, "%s %s" % (s, g))
    s, d = call("DELETE", "/v1/responses/" + r1["id"], key=k2)
    check("DELETE with another key: 404", s == 404, "%s %s" % (s, d))
    s, d = call("DELETE", "/v1/responses/" + r1["id"], key=k1)
    check("DELETE: deleted", s == 200 and d == {"id": r1["id"], "object": "response",
                                                "deleted": True}, "%s %s" % (s, d))
    s, g = call("GET", "/v1/responses/" + r1["id"], key=k1)
    s2, r = respond({"model": MODEL, "input": "x", "previous_response_id": r1["id"]}, key=k1)
    check("... then GET and continuing it: 404", s == 404 and s2 == 404, "%s %s" % (s, s2))
    s, r5 = respond({"model": MODEL, "input": "Hello there", **SAMPLE}, key=k1)
    s, e = respond({"model": MODEL, "input": [{"type": "item_reference",
                                              "id": r5["output"][0]["id"]}]}, key=k2)
    check("an item_reference to another key's response: 404", s == 404, "%s %s" % (s, e))
    s, r = respond({"model": MODEL, "input": "Hello", "store": False, **SAMPLE}, key=k1)
    s2, g = call("GET", "/v1/responses/" + r["id"], key=k1)
    check("store false: not fetched again (404)", s == 200 and s2 == 404, "%s %s" % (s2, g))
    # Forks and keys, forks and deletion: a conversation a1, a2 of k1, a fork f of a1.
    s, a1 = respond({"model": MODEL, "input": "My name is Ada.", **SAMPLE}, key=k1)
    s, a2 = respond({"model": MODEL, "input": "Hi.", "previous_response_id": a1["id"], **SAMPLE},
                    key=k1)
    s, e = respond({"model": MODEL, "input": "x", "previous_response_id": a1["id"]}, key=k2)
    s2, e2 = call("POST", "/v1/responses/input_tokens",
                  {"model": MODEL, "input": "x", "previous_response_id": a1["id"]}, key=k2)
    check("a fork from another key's response: 404, counted or run",
          s == 404 and e["error"]["code"] == "previous_response_not_found" and s2 == 404,
          "%s %s / %s %s" % (s, e, s2, e2))
    s, f = respond({"model": MODEL, "input": "And again?", "previous_response_id": a1["id"],
                    **SAMPLE}, key=k1)
    s2, d = call("DELETE", "/v1/responses/" + a1["id"], key=k1)
    s3, e = respond({"model": MODEL, "input": "x", "previous_response_id": a1["id"]}, key=k1)
    s4, e4 = respond({"model": MODEL, "input": "x", "previous_response_id": a2["id"]}, key=k1)
    check("a fork from a deleted response (its conversation deleted): 404",
          s == 200 and s2 == 200 and s3 == 404 and s4 == 404, "%s %s %s %s" % (s, s2, s3, e))
    s, g = call("GET", "/v1/responses/" + f["id"], key=k1)
    s2, f2 = respond({"model": MODEL, "input": "Once more.", "previous_response_id": f["id"],
                      **SAMPLE}, key=k1)
    check("... a fork made before the delete stays: fetched and continued",
          s == 200 and s2 == 200 and
          f2["usage"]["input_tokens_details"]["cached_tokens"] >= f["usage"]["input_tokens"],
          "%s %s" % (s2, json.dumps(f2)[:300]))

elif mode in ("restart-1", "restart-2"):
    state = os.environ["RESP_STATE"]
    if mode == "restart-1":
        s, r1 = respond({"model": MODEL, "input": "My name is Ada.", **SAMPLE})
        s2, r0 = respond({"model": MODEL, "input": "Hi.", **SAMPLE})
        s3, r01 = respond({"model": MODEL, "input": "Bye.", "previous_response_id": r0["id"],
                           **SAMPLE})
        check("stored responses before the restart", s == 200 and s2 == 200 and s3 == 200,
              json.dumps(r1)[:200])
        json.dump({"r1": r1, "r0": r0}, open(state, "w"))
    else:
        st = json.load(open(state))
        r1, r0 = st["r1"], st["r0"]
        s, f = respond({"model": MODEL, "input": "And again?", "previous_response_id": r0["id"],
                        **SAMPLE})
        s2, fresh = respond({"model": MODEL, "input": [{"role": "user", "content": "Hi."}] +
                             r0["output"] + [{"role": "user", "content": "And again?"}],
                             **SAMPLE})
        check("after the restart a fork from the first of two responses: turn 1 replayed from "
              "the log, the reply of the same items sent fresh",
              s == 200 and s2 == 200 and text_of(f) == text_of(fresh) and
              f["usage"]["input_tokens"] == fresh["usage"]["input_tokens"],
              "%s %s / %s" % (s, json.dumps(f)[:300], json.dumps(fresh)[:200]))
        s, g = call("GET", "/v1/responses/" + r1["id"])
        check("after the restart GET gives it again, from the log",
              s == 200 and text_of(g) == text_of(r1), "%s %s" % (s, json.dumps(g)[:300]))
        s, r2 = respond({"model": MODEL, "input": "What is my name?",
                         "previous_response_id": r1["id"], **SAMPLE})
        s3, c = chat([{"role": "user", "content": "My name is Ada."},
                      {"role": "assistant", "content": text_of(r1)},
                      {"role": "user", "content": "What is my name?"}], temperature=0, max_tokens=40)
        check("... and continuing it gives the whole conversation's reply",
              s == 200 and text_of(r2) == c["choices"][0]["message"]["content"] and
              r2["usage"]["input_tokens"] == c["usage"]["prompt_tokens"],
              "%s %s" % (s, json.dumps(r2)[:300]))
sys.exit(1 if fails else 0)
