#!/usr/bin/env python3
"""The reference for tests/chat/content.sh: a chat request's content (strings, text parts, null)
given to a template the way vLLM gives it (vllm/entrypoints/chat_utils.py), then rendered with
python3-jinja2 as transformers' apply_chat_template renders (hf_render.py).

vLLM decides the content format from the template's syntax tree (_detect_content_format):
"openai" when some for loop iterates an item's content (`for part in message['content']`,
`message.content`, also through filters, tests and slices), the item being the target of a loop
over `messages` or over a name set from it (`set loop_messages = messages[1:]`), else "string".
A non-name target where a match is found makes it give up: "string". With "string" text parts
are joined with "\\n" and null content is ""; with "openai" every content is a list of
{"type": "text", "text"} parts (a string one part, null none). An assistant's tool call
arguments given as JSON text become the object they hold.

  content.py format TEMPLATE...            prints "NAME openai|string" per template
  content.py batch OUTDIR CONV... -- TEMPLATE...   for each template T and conversation C:
      OUTDIR/T/C.req (what ours takes: the request's JSON, bos, eos, add_generation_prompt),
      C.out (the rendering), C.rc (0, 2 raised, 3 another error), C.err
"""
import copy
import json
import os
import sys

import jinja2.nodes

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_render  # noqa: E402


def _var(node, name):
    return isinstance(node, jinja2.nodes.Name) and node.ctx == "load" and node.name == name


def _attr(node, name, key):
    if isinstance(node, jinja2.nodes.Getitem):
        return (_var(node.node, name) and isinstance(node.arg, jinja2.nodes.Const)
                and node.arg.value == key)
    if isinstance(node, jinja2.nodes.Getattr):
        return _var(node.node, name) and node.attr == key
    return False


def _var_or_elems(node, name, key=None):
    if isinstance(node, jinja2.nodes.Filter):
        return node.node is not None and _var_or_elems(node.node, name, key)
    if isinstance(node, jinja2.nodes.Test):
        return _var_or_elems(node.node, name, key)
    if isinstance(node, jinja2.nodes.Getitem) and isinstance(node.arg, jinja2.nodes.Slice):
        return _var_or_elems(node.node, name, key)
    return _attr(node, name, key) if key else _var(node, name)


class GiveUp(Exception):
    pass


def detect(source):
    try:
        ast = hf_render.compile_template(source).environment.parse(source)
    except Exception:
        return "string"
    try:
        names = ["messages"]
        i = 0
        while i < len(names):
            for a in ast.find_all(jinja2.nodes.Assign):
                if _var_or_elems(a.node, names[i]):
                    if not isinstance(a.target, jinja2.nodes.Name):
                        raise GiveUp()
                    if a.target.name not in names:
                        names.append(a.target.name)
            i += 1
        items = []
        for loop in ast.find_all(jinja2.nodes.For):
            if any(_var_or_elems(loop.iter, n) for n in names):
                if not isinstance(loop.target, jinja2.nodes.Name):
                    raise GiveUp()
                items.append(loop.target.name)
        for loop in ast.find_all(jinja2.nodes.For):
            if any(_var_or_elems(loop.iter, n, "content") for n in items):
                if not isinstance(loop.target, jinja2.nodes.Name):
                    raise GiveUp()
                return "openai"
    except GiveUp:
        return "string"
    return "string"


def normalize(messages, fmt):
    out = copy.deepcopy(messages)
    for m in out:
        c = m.get("content")
        if c is None:
            texts = []
        elif isinstance(c, str):
            texts = [c]
        else:
            texts = [p["text"] for p in c if p.get("type") == "text"]
        if fmt == "openai":
            m["content"] = [{"type": "text", "text": t} for t in texts]
        elif not isinstance(c, str):
            m["content"] = "\n".join(texts)
        for call in m.get("tool_calls") or []:
            fn = call.get("function") or {}
            if isinstance(fn.get("arguments"), str):
                try:
                    fn["arguments"] = json.loads(fn["arguments"])
                except ValueError:
                    pass
    return out


def batch(outdir, rest):
    cut = rest.index("--")
    convs, templates = rest[:cut], rest[cut + 1:]
    for tp in templates:
        tname = os.path.basename(tp)
        tdir = os.path.join(outdir, tname)
        os.makedirs(tdir, exist_ok=True)
        with open(tp, encoding="utf-8") as f:
            source = f.read()
        fmt = detect(source)
        with open(os.path.join(tdir, "format"), "w") as f:
            f.write(fmt + "\n")
        for cp in convs:
            cname = os.path.splitext(os.path.basename(cp))[0]
            with open(cp, encoding="utf-8") as f:
                conv = json.load(f)
            ctx = hf_render.make_context(tp, cp)
            req = {"messages": conv["messages"]}
            if conv.get("tools") is not None:
                req["tools"] = conv["tools"]
            if conv.get("kwargs"):
                req["chat_template_kwargs"] = conv["kwargs"]
            base = os.path.join(tdir, cname)
            with open(base + ".req", "w", encoding="utf-8") as f:
                json.dump({"request": req, "bos_token": ctx["bos_token"],
                           "eos_token": ctx["eos_token"],
                           "add_generation_prompt": ctx["add_generation_prompt"]},
                          f, ensure_ascii=False, indent=1)
            ctx["messages"] = normalize(ctx["messages"], fmt)
            rc, out, err = hf_render.render_source(source, ctx)
            with open(base + ".out", "wb") as f:
                f.write(out)
            with open(base + ".rc", "w") as f:
                f.write(f"{rc}\n")
            with open(base + ".err", "w", encoding="utf-8") as f:
                f.write(err + "\n" if err else "")
    return 0


def main(argv):
    if len(argv) >= 3 and argv[1] == "format":
        for tp in argv[2:]:
            with open(tp, encoding="utf-8") as f:
                print(os.path.basename(tp), detect(f.read()))
        return 0
    if len(argv) >= 3 and argv[1] == "batch" and "--" in argv:
        return batch(argv[2], argv[3:])
    print(__doc__, file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
