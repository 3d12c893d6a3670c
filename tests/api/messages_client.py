#!/usr/bin/env python3
"""The checks of messages.sh against a head: POST /v1/messages (Anthropic's Messages API)
whole and streamed beside the chat completion of the same conversation (the same prompt and
reply), its stream events in order, stop_reason and stop_sequence, errors in Anthropic's shape
(with keys as x-api-key); with Qwen3's template and scripted replies: thinking and tool_use
blocks, their stream deltas, a tool_result continuing the conversation; count_tokens giving
the messages' input tokens.

  messages_client.py PORT MODE KEY
MODE: plain (the simulated engine's ChatML), qwen3 (Qwen3's template, --sim-script on).
Prints "ok NAME" / "FAIL NAME: why" lines; exit 1 on a failure."""
import http.client
import json
import sys

port, mode, key = int(sys.argv[1]), sys.argv[2], sys.argv[3]
fails = 0
MODEL = "sim-1"


def check(name, cond, why=""):
    global fails
    print(("ok   " + name) if cond else "FAIL %s: %s" % (name, why))
    fails += 0 if cond else 1


def call(path, body, headers=None, stream=False):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    h = {"Content-Type": "application/json", "x-api-key": key, "anthropic-version": "2023-06-01"}
    h.update(headers or {})
    c.request("POST", path, json.dumps(body), h)
    r = c.getresponse()
    if stream and r.status == 200:
        out, name = [], None
        for raw in r:
            line = raw.decode("utf-8").rstrip("\n")
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                out.append((name, json.loads(line[6:])))
        return r.status, out
    return r.status, json.loads(r.read() or b"null")


def msg(body, **kw):
    return call("/v1/messages", {"model": MODEL, **body}, **kw)


def chat(messages, **kw):
    return call("/v1/chat/completions", {"model": MODEL, "messages": messages, **kw},
                headers={"Authorization": "Bearer " + key})


def text_of(m):
    return "".join(b["text"] for b in m.get("content", []) if b["type"] == "text")


def order_ok(evs):
    names = [n for n, _ in evs]
    if names[:2] != ["message_start", "ping"] or names[-2:] != ["message_delta", "message_stop"]:
        return "begins %s, ends %s" % (names[:2], names[-2:])
    if any(d.get("type") != n for n, d in evs):
        return "an event's type is not its name"
    open_ = None
    for n, d in evs:
        if n == "content_block_start":
            if open_ is not None:
                return "block %d starts inside %d" % (d["index"], open_)
            open_ = d["index"]
        elif n in ("content_block_delta", "content_block_stop") and d["index"] != open_:
            return "%s of block %s outside it" % (n, d["index"])
        if n == "content_block_stop":
            open_ = None
    return "" if open_ is None else "block %d never stopped" % open_


if mode == "plain":
    s, m = msg({"max_tokens": 40, "temperature": 0, "system": "Be brief.",
                "messages": [{"role": "user", "content": "Hello there"}]})
    s2, c = chat([{"role": "system", "content": "Be brief."},
                  {"role": "user", "content": "Hello there"}], temperature=0, max_tokens=40)
    u = m.get("usage", {}) if isinstance(m, dict) else {}
    check("a message: the chat completion's reply and prompt", s == 200 and
          m["type"] == "message" and m["role"] == "assistant" and m["id"].startswith("msg_") and
          text_of(m) == c["choices"][0]["message"]["content"] and
          u["input_tokens"] + u["cache_read_input_tokens"] == c["usage"]["prompt_tokens"] and
          u["output_tokens"] == c["usage"]["completion_tokens"] and
          m["stop_reason"] in ("end_turn", "max_tokens"),
          "%s %s / %s" % (s, json.dumps(m)[:300], json.dumps(c)[:200]))
    s, evs = msg({"max_tokens": 40, "temperature": 0, "system": "Be brief.", "stream": True,
                  "messages": [{"role": "user", "content": "Hello there"}]}, stream=True)
    text = "".join(d["delta"]["text"] for n, d in evs if n == "content_block_delta" and
                   d["delta"]["type"] == "text_delta")
    check("streamed: message_start, ping, a text block's events, message_delta, message_stop",
          s == 200 and not order_ok(evs), order_ok(evs) if s == 200 else s)
    check("streamed: the same text and usage", text == text_of(m) and
          evs[-2][1]["usage"]["output_tokens"] == u["output_tokens"] and
          evs[0][1]["message"]["usage"]["input_tokens"] == u["input_tokens"],
          "%r / %r" % (text[:80], text_of(m)[:80]))
    full = text_of(m)
    stop = full[3:5]
    s, m2 = msg({"max_tokens": 40, "temperature": 0, "system": "Be brief.", "stop_sequences": [stop],
                 "messages": [{"role": "user", "content": "Hello there"}]})
    check("stop_sequences: stop_reason stop_sequence, the sequence, the text before it",
          s == 200 and m2["stop_reason"] == "stop_sequence" and m2["stop_sequence"] == stop and
          text_of(m2) == full[:full.index(stop)], json.dumps(m2)[:300])
    s, m3 = msg({"max_tokens": 3, "messages": [{"role": "user", "content": "Hello there"}]})
    check("max_tokens reached: stop_reason max_tokens", s == 200 and
          m3["stop_reason"] == "max_tokens" and m3["usage"]["output_tokens"] == 3, json.dumps(m3))
    # Errors, in Anthropic's shape.
    for body, status, etype, frag in [
        ({"messages": [{"role": "user", "content": "x"}]}, 400, "invalid_request_error",
         "max_tokens"),
        ({"max_tokens": 5, "messages": [{"role": "user", "content": [
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": ""}}]}]},
         400, "invalid_request_error", "messages[0].content[0].type"),
        ({"max_tokens": 5, "messages": [{"role": "system", "content": "x"}]}, 400,
         "invalid_request_error", "messages[0].role"),
        ({"max_tokens": 5, "tools": [{"type": "web_search_20250305", "name": "w"}],
          "messages": [{"role": "user", "content": "x"}]}, 400, "invalid_request_error", "tools[0].type"),
        ({"max_tokens": 5, "model": "nope", "messages": [{"role": "user", "content": "x"}]}, 404,
         "not_found_error", "nope"),
    ]:
        s, e = msg(body)
        check("%s: %d %s" % (json.dumps(body)[:60], status, etype),
              s == status and e.get("type") == "error" and e["error"]["type"] == etype and
              frag in e["error"]["message"], "%s %s" % (s, json.dumps(e)[:300]))
    # count_tokens: the prompt's tokens, as the message's usage gives them; nothing generated.
    s, n = call("/v1/messages/count_tokens", {"model": MODEL, "system": "Be brief.",
                "messages": [{"role": "user", "content": "Hello there"}]})
    check("count_tokens: the message's input tokens (no max_tokens needed)",
          s == 200 and n == {"input_tokens": u["input_tokens"] + u["cache_read_input_tokens"]},
          "%s %s / %s" % (s, n, u))
    s, n2 = call("/v1/messages/count_tokens", {"model": MODEL, "system": "Be brief.", "stream": True,
                 "max_tokens": 5, "messages": [{"role": "user", "content": "Hello there"}]})
    check("count_tokens with stream and max_tokens: the same count, as JSON", s == 200 and n2 == n,
          "%s %s" % (s, n2))
    for body, status, frag in [
        ({"model": MODEL, "messages": []}, 400, "messages"),
        ({"model": "nope", "messages": [{"role": "user", "content": "x"}]}, 404, "nope"),
    ]:
        s, e = call("/v1/messages/count_tokens", body)
        check("count_tokens %s: %d in Anthropic's shape" % (json.dumps(body)[:50], status),
              s == status and e.get("type") == "error" and frag in e["error"]["message"],
              "%s %s" % (s, json.dumps(e)[:300]))
    s, e = call("/v1/messages/count_tokens", {"model": MODEL, "messages": [
        {"role": "user", "content": "x"}]}, headers={"x-api-key": "wrong"})
    check("count_tokens with a wrong x-api-key: 401", s == 401, "%s %s" % (s, e))
    s, e = msg({"max_tokens": 5, "messages": [{"role": "user", "content": "x"}]},
               headers={"x-api-key": "wrong"})
    check("a wrong x-api-key: 401 authentication_error", s == 401 and
          e["error"]["type"] == "authentication_error", "%s %s" % (s, e))

elif mode == "qwen3":
    tools = [{"name": "get_weather", "description": "The weather",
              "input_schema": {"type": "object", "properties": {"city": {"type": "string"}},
                               "required": ["city"]}}]
    say = lambda reply: "Weather?\nsim-reply: " + json.dumps(reply).replace("<", "\\u003c")
    markup = ('<think>\nI should look.\n</think>\n\n<tool_call>\n{"name": "get_weather", '
              '"arguments": {"city": "Paris"}}\n</tool_call>')
    s, m = msg({"max_tokens": 400, "tools": tools, "messages": [{"role": "user", "content": say(markup)}]})
    kinds = [b["type"] for b in m.get("content", [])] if s == 200 else []
    tu = [b for b in m.get("content", []) if b["type"] == "tool_use"] if s == 200 else []
    check("thinking then a call: thinking and tool_use blocks, stop_reason tool_use",
          kinds == ["thinking", "tool_use"] and m["content"][0]["thinking"] == "I should look." and
          tu[0]["name"] == "get_weather" and tu[0]["input"] == {"city": "Paris"} and
          m["stop_reason"] == "tool_use", "%s %s" % (s, json.dumps(m)[:400]))
    s, n = call("/v1/messages/count_tokens", {"model": MODEL, "tools": tools,
                "messages": [{"role": "user", "content": say(markup)}]})
    check("count_tokens with tools: the message's input tokens (the tools' text counted)",
          s == 200 and n["input_tokens"] == m["usage"]["input_tokens"] +
          m["usage"]["cache_read_input_tokens"], "%s %s / %s" % (s, n, m.get("usage")))
    s, evs = msg({"max_tokens": 400, "tools": tools, "stream": True,
                  "messages": [{"role": "user", "content": say(markup)}]}, stream=True)
    deltas = [d["delta"] for n, d in evs if n == "content_block_delta"]
    thinking = "".join(x.get("thinking", "") for x in deltas if x["type"] == "thinking_delta")
    args = "".join(x["partial_json"] for x in deltas if x["type"] == "input_json_delta")
    check("streamed: thinking_delta, then the call's input_json_delta, stop_reason tool_use",
          s == 200 and not order_ok(evs) and thinking == "I should look." and
          json.loads(args) == {"city": "Paris"} and
          evs[-2][1]["delta"]["stop_reason"] == "tool_use",
          "%s %s" % (order_ok(evs) if s == 200 else s, deltas))
    s, m2 = msg({"max_tokens": 400, "tools": tools, "messages": [
        {"role": "user", "content": say(markup)},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "I should look.",
                                           "signature": ""},
                                          {"type": "tool_use", "id": "toolu_1", "name": "get_weather",
                                           "input": {"city": "Paris"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                      "content": "21 C, clear"},
                                     {"type": "text", "text": say("It is 21 C and clear.")}]}]})
    check("a tool_result (and the user's text) continuing it: the reply, end_turn",
          s == 200 and text_of(m2) == "It is 21 C and clear." and m2["stop_reason"] == "end_turn",
          "%s %s" % (s, json.dumps(m2)[:300]))
sys.exit(1 if fails else 0)
