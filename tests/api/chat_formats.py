"""The cases of chat_formats.sh and their checks.

  chat_formats.py cases FAMILY            the requests (JSON: [{name, request}]) on stdout
  chat_formats.py check FAMILY RESULTS    checks what the openai client got (chat_formats.mjs's
                                          output), one "ok"/"FAIL" line each; exit 1 on a failure

Each case's last user message ends with a line  sim-reply: "<JSON string>"  (a node with
--sim-script on answers exactly that text): the family's tool-call or reasoning markup. The
check wants OpenAI's shapes: message.tool_calls (names, the model's arguments text, ids),
finish_reason, reasoning_content, content without markers; streamed, the same text in
content / reasoning_content deltas, each call in tool_calls deltas with index, id, type and
function, and no markup in a content delta (none split across two when the content is
markup kept verbatim).
"""
import json
import sys

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}
TIME = {"type": "function", "function": {
    "name": "get_time", "description": "The time in a time zone",
    "parameters": {"type": "object", "properties": {"tz": {"type": "string"}},
                   "required": ["tz"]}}}
TOOLS = [WEATHER, TIME]
PARIS = '{"city": "Paris"}'
TZ = '{"tz": "Europe/Paris"}'


def call(name, args, id_=None):
    return {"name": name, "arguments": args, "id": id_}


def case(name, reply, content="", reasoning="", calls=(), tools=True, verbatim=False,
         kwargs=None, history=(), parts=False, twin=None, extra=None):
    """verbatim: the reply comes back as content, markers included. parts: the last user
    message as two text parts (the question, the marker line). twin: the name of a case whose
    prompt must be this one's (the same usage.prompt_tokens)."""
    if verbatim:
        content = reply
    # '<' as \u003c: the prompt holds no marker text; the node decodes the string.
    marker = "sim-reply: " + json.dumps(reply).replace("<", "\\u003c")
    ask = "What is the weather in Paris?"
    last = ([{"type": "text", "text": ask}, {"type": "text", "text": marker}] if parts
            else ask + "\n" + marker)
    req = {"messages": list(history) + [{"role": "user", "content": last}],
           "temperature": 0.7, "max_tokens": 400}
    if tools:
        req["tools"] = TOOLS
    if kwargs:
        req["chat_template_kwargs"] = kwargs
    if extra:
        req.update(extra)
    return {"name": name, "request": req,
            "want": {"content": content, "reasoning": reasoning, "calls": list(calls),
                     "finish": "tool_calls" if calls else "stop", "tools": tools},
            "twin": twin}


def text(t):
    return [{"type": "text", "text": t}]


def parts_cases(tools=True, system=True):
    """Content as arrays of text parts (what Vercel's and LangChain's clients send) and an
    assistant's null content beside its tool calls, and the same conversation as strings ("" for
    null, parts joined with "\n", as vLLM and llama.cpp's server give a template that takes
    strings): the same prompt, the same reply."""
    sys_p = [{"role": "system", "content": text("Be brief.") + text("Use Celsius.")}]
    sys_s = [{"role": "system", "content": "Be brief.\nUse Celsius."}]
    if tools:
        past_p = [
            {"role": "user", "content": text("And in Rome?")},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "rome12345", "type": "function",
                 "function": {"name": "get_weather", "arguments": '{"city": "Rome"}'}}]},
            {"role": "tool", "tool_call_id": "rome12345", "content": text("18 C, clear")},
            {"role": "assistant", "content": text("It is 18 C") + text("and clear in Rome.")},
        ]
        past_s = [
            {"role": "user", "content": "And in Rome?"},
            {"role": "assistant", "content": "", "tool_calls": past_p[1]["tool_calls"]},
            {"role": "tool", "tool_call_id": "rome12345", "content": "18 C, clear"},
            {"role": "assistant", "content": "It is 18 C\nand clear in Rome."},
        ]
    else:
        past_p = [{"role": "user", "content": text("And in Rome?") + text("Briefly.")},
                  {"role": "assistant", "content": text("18 C, clear.")}]
        past_s = [{"role": "user", "content": "And in Rome?\nBriefly."},
                  {"role": "assistant", "content": "18 C, clear."}]
    if system:
        past_p, past_s = sys_p + past_p, sys_s + past_s
    reply = "It is sunny in Paris."
    return [
        case("text parts and null content", reply, content=reply, tools=tools, history=past_p,
             parts=True, twin="the same conversation as strings"),
        case("the same conversation as strings", reply, content=reply, tools=tools,
             history=past_s),
    ]


# A past turn: an assistant's call and its result (a 9-character id, as Mistral wants).
HISTORY = [
    {"role": "user", "content": "And in Rome?"},
    {"role": "assistant", "content": "", "tool_calls": [
        {"id": "rome12345", "type": "function",
         "function": {"name": "get_weather", "arguments": '{"city": "Rome"}'}}]},
    {"role": "tool", "tool_call_id": "rome12345", "content": "18 C, clear"},
    {"role": "assistant", "content": "It is 18 C and clear in Rome."},
]

HERMES_CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
HERMES_TIME = '<tool_call>\n{"name": "get_time", "arguments": {"tz": "Europe/Paris"}}\n</tool_call>'


def cases(family):
    if family == "gemma-2":  # no tools, no system role
        return parts_cases(tools=False, system=False)
    return family_cases(family) + parts_cases(tools=family != "r1-distill")


def family_cases(family):
    if family == "qwen2.5":
        return [
            case("one call", HERMES_CALL, calls=[call("get_weather", PARIS)]),
            case("parallel calls", HERMES_CALL + "\n" + HERMES_TIME,
                 calls=[call("get_weather", PARIS), call("get_time", TZ)]),
            case("content then a call", "Let me look that up.\n" + HERMES_CALL,
                 content="Let me look that up.", calls=[call("get_weather", PARIS)]),
            case("a malformed call stays content",
                 '<tool_call>\n{"name": "get_weather", "arguments": {"city": }}\n</tool_call>',
                 verbatim=True),
            case("a call to an unknown tool stays content",
                 '<tool_call>\n{"name": "launch", "arguments": {}}\n</tool_call>', verbatim=True),
            case("no tools in the request: markup is content", HERMES_CALL, tools=False,
                 verbatim=True),
            case("plain content", "It is sunny in Paris.", content="It is sunny in Paris."),
            case("after a past call and its result", HERMES_CALL, history=HISTORY,
                 calls=[call("get_weather", PARIS)]),
        ]
    if family == "qwen3":
        return [
            case("reasoning then content",
                 "<think>\nThe user wants the weather.\n</think>\n\nIt is sunny.",
                 reasoning="The user wants the weather.", content="It is sunny."),
            case("reasoning then a call",
                 "<think>\nI should call get_weather.\n</think>\n\n" + HERMES_CALL,
                 reasoning="I should call get_weather.", calls=[call("get_weather", PARIS)]),
            case("reasoning, no tools", "<think>\nEasy.\n</think>\n\nSunny.", tools=False,
                 reasoning="Easy.", content="Sunny."),
            case("a malformed call after reasoning stays content",
                 "<think>\nHm.\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\"\n</tool_call>",
                 reasoning="Hm.", content='<tool_call>\n{"name": "get_weather"\n</tool_call>'),
        ]
    if family == "llama-3.2":
        j = '{"name": "get_weather", "parameters": {"city": "Paris"}}'
        t = '{"name": "get_time", "parameters": {"tz": "Europe/Paris"}}'
        return [
            case("one JSON call", j, calls=[call("get_weather", PARIS)]),
            case("a call after <|python_tag|>", "<|python_tag|>" + j,
                 calls=[call("get_weather", PARIS)]),
            case("a call with \"type\": \"function\"",
                 '{"type": "function", "name": "get_time", "parameters": {"tz": "Europe/Paris"}}',
                 calls=[call("get_time", TZ)]),
            case("parallel calls", j + "\n" + t,
                 calls=[call("get_weather", PARIS), call("get_time", TZ)]),
            case("a malformed call stays content", j[:-1], verbatim=True),
            case("plain content", "It is sunny in Paris.", content="It is sunny in Paris."),
            case("after a past call and its result", j, history=HISTORY[:3],
                 calls=[call("get_weather", PARIS)]),
        ]
    if family == "mistral-nemo":
        one = '{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "abc123def"}'
        two = '{"name": "get_time", "arguments": {"tz": "Europe/Paris"}, "id": "xyz789uvw"}'
        return [
            case("one call with its id", "[TOOL_CALLS][" + one + "]",
                 calls=[call("get_weather", PARIS, "abc123def")]),
            case("parallel calls", "[TOOL_CALLS][" + one + ", " + two + "]",
                 calls=[call("get_weather", PARIS, "abc123def"),
                        call("get_time", TZ, "xyz789uvw")]),
            case("content then a call", "Let me check. [TOOL_CALLS][" + one + "]",
                 content="Let me check.", calls=[call("get_weather", PARIS, "abc123def")]),
            case("a malformed call stays content", "[TOOL_CALLS][" + one, verbatim=True),
            case("plain content", "It is sunny in Paris.", content="It is sunny in Paris."),
            case("after a past call and its result", "[TOOL_CALLS][" + one + "]",
                 history=HISTORY, calls=[call("get_weather", PARIS, "abc123def")]),
        ]
    if family == "phi-4-mini":
        one = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
        two = '{"name": "get_time", "arguments": {"tz": "Europe/Paris"}}'
        # The system message's tools as Phi-4-mini's card writes them (json.dumps of the
        # functions): what the head puts there from the request's tools, so the same prompt.
        own = [{"role": "system", "content": "Be brief.",
                "tools": json.dumps([t["function"] for t in TOOLS])}]
        return [
            case("one call", "functools[" + one + "]", calls=[call("get_weather", PARIS)]),
            case("parallel calls", "functools[" + one + ", " + two + "]",
                 calls=[call("get_weather", PARIS), call("get_time", TZ)]),
            case("content then a call", "Let me check. functools[" + one + "]",
                 content="Let me check.", calls=[call("get_weather", PARIS)]),
            case("\"parameters\" for \"arguments\"",
                 'functools[{"name": "get_time", "parameters": {"tz": "Europe/Paris"}}]',
                 calls=[call("get_time", TZ)]),
            case("a malformed call stays content", "functools[" + one, verbatim=True),
            case("a call to an unknown tool stays content",
                 'functools[{"name": "launch", "arguments": {}}]', verbatim=True),
            case("no tools in the request: markup is content", "functools[" + one + "]",
                 tools=False, verbatim=True),
            case("plain content", "It is sunny in Paris.", content="It is sunny in Paris."),
            case("after a past call and its result", "functools[" + one + "]",
                 history=HISTORY, calls=[call("get_weather", PARIS)]),
            case("the head puts the tools in the system message", "functools[" + one + "]",
                 history=[{"role": "system", "content": "Be brief."}],
                 calls=[call("get_weather", PARIS)],
                 twin="the system message's own tools"),
            case("the system message's own tools", "functools[" + one + "]", history=own,
                 calls=[call("get_weather", PARIS)]),
        ]
    if family == "smollm3":
        # Its template (Unsloth's, llama.cpp's bundle) takes no tools and writes no call
        # markup: a reply's <think> block is reasoning; its reasoning mode is /think unless the
        # system message says /no_think (or enable_thinking is false), when the generation
        # prompt closes an empty think block and the reply is the answer.
        no_think = [{"role": "system", "content": "Be brief. /no_think"}]
        return [
            case("reasoning then content",
                 "<think>\nThe user wants the weather.\n</think>\nIt is sunny.",
                 reasoning="The user wants the weather.", content="It is sunny."),
            case("reasoning, no tools", "<think>\nEasy.\n</think>\n\nSunny.", tools=False,
                 reasoning="Easy.", content="Sunny."),
            case("no think block: content", "It is sunny in Paris.",
                 content="It is sunny in Paris."),
            case("/no_think in the system message: the answer is content", "It is 4.",
                 tools=False, history=no_think, content="It is 4."),
            case("enable_thinking false: the answer is content", "It is 4.", tools=False,
                 kwargs={"enable_thinking": False}, content="It is 4."),
        ]
    if family == "gpt-oss":
        return harmony_cases()
    if family == "r1-distill":
        return [
            case("the generation prompt opens the reasoning",
                 "Two plus two is four.\n</think>\n\nIt is 4.", tools=False,
                 kwargs={"enable_thinking": True},
                 reasoning="Two plus two is four.", content="It is 4."),
            case("reasoning closed by the prompt (enable_thinking false)", "It is 4.",
                 tools=False, kwargs={"enable_thinking": False}, content="It is 4."),
        ]
    raise SystemExit("unknown family " + family)


def harmony_cases():
    """gpt-oss's harmony replies (after the prompt's <|start|>assistant): the analysis channel
    as reasoning_content, the final channel as content, commentary to=functions.NAME as a tool
    call (its <|call|> written, or left out as a node leaves its end-of-generation token out)."""
    analysis = "<|channel|>analysis<|message|>"
    nxt = "<|end|><|start|>assistant"
    final = "<|channel|>final<|message|>"
    w = "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
    t = "<|channel|>commentary to=functions.get_time <|constrain|>json<|message|>"
    # A past call with its reasoning given back: as reasoning_content (OpenAI's field, which
    # the head gives the template as its thinking) and as the template's own thinking field.
    past = [dict(HISTORY[0]), dict(HISTORY[1]), dict(HISTORY[2])]
    past_rc = [past[0], dict(past[1], reasoning_content="Rome: call get_weather."), past[2]]
    past_th = [past[0], dict(past[1], thinking="Rome: call get_weather."), past[2]]
    return [
        case("reasoning then content",
             analysis + "The user wants the weather." + nxt + final + "It is sunny.<|return|>",
             reasoning="The user wants the weather.", content="It is sunny."),
        case("reasoning then a call",
             analysis + "I should call get_weather." + nxt + w + PARIS + "<|call|>",
             reasoning="I should call get_weather.", calls=[call("get_weather", PARIS)]),
        case("a call, its <|call|> left out", w + PARIS, calls=[call("get_weather", PARIS)]),
        case("a preamble then a call",
             "<|channel|>commentary<|message|>Let me check.<|end|><|start|>assistant" + w + PARIS,
             content="Let me check.", calls=[call("get_weather", PARIS)]),
        case("the recipient before the channel (as its template writes a call)",
             " to=functions.get_time<|channel|>commentary json<|message|>" + TZ + "<|call|>",
             calls=[call("get_time", TZ)]),
        case("reasoning, no tools", analysis + "Easy." + nxt + final + "Sunny.", tools=False,
             reasoning="Easy.", content="Sunny."),
        case("a malformed call stays content", w + '{"city": }<|call|>', verbatim=True),
        case("a call to an unknown tool stays content",
             "<|channel|>commentary to=functions.launch <|constrain|>json<|message|>{}<|call|>",
             verbatim=True),
        case("a builtin tool's call stays content",
             "<|channel|>analysis to=browser.search code<|message|>{\"query\": \"x\"}<|call|>",
             verbatim=True),
        case("no tools in the request: a call is content", w + PARIS + "<|call|>", tools=False,
             verbatim=True),
        case("a reply not in harmony is content", "It is sunny in Paris.",
             content="It is sunny in Paris."),
        case("after a past call and its result", analysis + "Again." + nxt + t + TZ,
             history=HISTORY, reasoning="Again.", calls=[call("get_time", TZ)]),
        case("a past call's reasoning_content", final + "Fine.", history=past_rc,
             content="Fine.", twin="a past call's thinking"),
        case("a past call's thinking", final + "Fine.", history=past_th, content="Fine."),
        case("reasoning_effort", final + "Fine.", content="Fine.",
             extra={"reasoning_effort": "high"}, twin="reasoning_effort as a template kwarg"),
        case("reasoning_effort as a template kwarg", final + "Fine.", content="Fine.",
             kwargs={"reasoning_effort": "high"}),
    ]


MARKER_CHARS = "<[{|"
MARKERS = ("<tool_call>", "</tool_call>", "<think>", "</think>", "[TOOL_CALLS]", "<|python_tag|>",
           "functools[", "<|channel|>", "<|message|>", "<|end|>", "<|start|>", "<|call|>",
           "<|return|>", "<|constrain|>")


def split_markers(deltas, tools):
    """The markers that a boundary between content deltas cuts in two (tool-call markers are
    text like any other when the request has no tools)."""
    text, cuts, at = "".join(deltas), set(), 0
    for d in deltas[:-1]:
        at += len(d)
        cuts.add(at)
    found = []
    for m in MARKERS:
        if not tools and "think" not in m:
            continue
        i = text.find(m)
        while i >= 0:
            if any(i < c < i + len(m) for c in cuts):
                found.append(m)
            i = text.find(m, i + 1)
    return found


def check(family, results):
    by_name = {c["name"]: c for c in cases(family)}
    fails = 0

    def verdict(name, problems):
        nonlocal fails
        if problems:
            fails += 1
            print("FAIL %s: %s" % (name, "; ".join(problems)))
        else:
            print("ok   %s" % name)

    def check_calls(got, want, problems, where):
        if len(got) != len(want):
            problems.append("%s: %d tool calls, want %d" % (where, len(got), len(want)))
            return
        for i, (g, w) in enumerate(zip(got, want)):
            if g.get("name") != w["name"] or g.get("arguments") != w["arguments"]:
                problems.append("%s: call %d is %s(%s), want %s(%s)" % (
                    where, i, g.get("name"), g.get("arguments"), w["name"], w["arguments"]))
            gid = g.get("id") or ""
            if (w["id"] and gid != w["id"]) or (not w["id"] and not gid.startswith("call_")):
                problems.append("%s: call %d id %r, want %r" % (where, i, gid, w["id"] or "call_..."))

    for r in results:
        c = by_name[r["name"]]
        w = c["want"]
        name = "%s: %s" % (family, r["name"])
        # Whole.
        p = []
        full = r["full"]
        if "choices" not in full:
            verdict(name + " (whole)", ["no completion: %s" % json.dumps(full)[:300]])
        else:
            ch = full["choices"][0]
            m = ch["message"]
            if (m.get("content") or "") != w["content"]:
                p.append("content %r, want %r" % (m.get("content"), w["content"]))
            if w["calls"] and w["content"] == "" and m.get("content") not in (None, ""):
                p.append("content %r beside the calls" % m.get("content"))
            if (m.get("reasoning_content") or "") != w["reasoning"]:
                p.append("reasoning_content %r, want %r" % (m.get("reasoning_content"), w["reasoning"]))
            tcs = m.get("tool_calls") or []
            for t in tcs:
                if t.get("type") != "function":
                    p.append("a tool call of type %r" % t.get("type"))
            check_calls([dict(t.get("function", {}), id=t.get("id")) for t in tcs],
                        w["calls"], p, "message.tool_calls")
            if ch["finish_reason"] != w["finish"]:
                p.append("finish_reason %r, want %r" % (ch["finish_reason"], w["finish"]))
            verdict(name + " (whole)", p)
        # Streamed.
        p = []
        chunks = r["chunks"]
        if not isinstance(chunks, list) or not chunks:
            verdict(name + " (streamed)", ["no stream: %s" % json.dumps(chunks)[:300]])
            continue
        content, reasoning, calls, finish = "", "", {}, None
        pieces = []
        plain = not any(x in w["content"] for x in MARKER_CHARS)
        for k in chunks:
            for ch in k.get("choices", []):
                d = ch.get("delta") or {}
                piece = d.get("content") or ""
                if piece and plain and any(x in piece for x in MARKER_CHARS):
                    p.append("a content delta holds markup: %r" % piece)
                if piece:
                    pieces.append(piece)
                content += piece
                reasoning += d.get("reasoning_content") or ""
                for t in d.get("tool_calls") or []:
                    i = t.get("index")
                    if not isinstance(i, int):
                        p.append("a tool_calls delta without an index: %r" % t)
                        continue
                    f = t.get("function") or {}
                    if i not in calls:
                        if not t.get("id") or t.get("type") != "function" or not f.get("name"):
                            p.append("call %d's first delta lacks id, type or name: %r" % (i, t))
                        calls[i] = {"name": f.get("name"), "arguments": "", "id": t.get("id")}
                    calls[i]["arguments"] += f.get("arguments") or ""
                if ch.get("finish_reason"):
                    finish = ch["finish_reason"]
        for m in split_markers(pieces, w["tools"]):
            p.append("%s split across content deltas" % m)
        if content != w["content"]:
            p.append("content deltas %r, want %r" % (content, w["content"]))
        if reasoning != w["reasoning"]:
            p.append("reasoning_content deltas %r, want %r" % (reasoning, w["reasoning"]))
        if sorted(calls) != list(range(len(calls))):
            p.append("tool call indexes %r" % sorted(calls))
        check_calls([calls[i] for i in sorted(calls)], w["calls"], p, "tool_calls deltas")
        if finish != w["finish"]:
            p.append("finish_reason %r, want %r" % (finish, w["finish"]))
        verdict(name + " (streamed)", p)
    got = {r["name"]: r for r in results}
    for r in results:
        twin = by_name[r["name"]].get("twin")
        if not twin or twin not in got:
            continue
        a = (r["full"].get("usage") or {}).get("prompt_tokens")
        b = (got[twin]["full"].get("usage") or {}).get("prompt_tokens")
        verdict("%s: %s (the prompt of %s)" % (family, r["name"], twin),
                [] if a and a == b else ["usage.prompt_tokens %r, %r for %s" % (a, b, twin)])
    missing = set(by_name) - {r["name"] for r in results}
    for m in sorted(missing):
        verdict("%s: %s" % (family, m), ["no result"])
    return fails


if __name__ == "__main__":
    if sys.argv[1] == "cases":
        print(json.dumps([{"name": c["name"], "request": c["request"]} for c in cases(sys.argv[2])]))
    elif sys.argv[1] == "check":
        sys.exit(1 if check(sys.argv[2], json.load(open(sys.argv[3]))) else 0)
