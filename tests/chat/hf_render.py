#!/usr/bin/env python3
"""The reference for tests/chat/templates.sh: renders a chat template the way Hugging Face
transformers' apply_chat_template does, with Debian's python3-jinja2.

  hf_render.py context TEMPLATE CONVERSATION   prints the render context (JSON) of a conversation
      fixture for a template: its messages, tools and kwargs, tools/documents None when absent
      (as apply_chat_template passes them), bos_token/eos_token of the template's family.
  hf_render.py render TEMPLATE CONTEXT         prints the rendering (exact bytes, no newline added).
  hf_render.py batch OUTDIR CONV... -- TEMPLATE...   for each template T and conversation C:
      OUTDIR/T/C.ctx (the context), C.out (the rendering), C.rc (the exit status), C.err.

The environment is transformers' (_compile_jinja_template): ImmutableSandboxedEnvironment with
trim_blocks, lstrip_blocks, the loopcontrols extension and a `generation` block tag that renders
its body (AssistantTracker), its own tojson filter (json.dumps with ensure_ascii=False and the
indent, separators, sort_keys arguments), and the raise_exception and strftime_now globals.
strftime_now formats SF_JINJA_NOW (seconds since the epoch, UTC) so that both renderers agree.
Exit status: 0 rendered; 2 the template called raise_exception (message on stderr); 3 any
other template error (its type and message on stderr); 1 usage or I/O.
"""
import datetime
import json
import os
import sys

import jinja2
import jinja2.ext
import jinja2.nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment


class Raised(Exception):
    pass


class AssistantTracker(jinja2.ext.Extension):
    # transformers' extension: {% generation %}...{% endgeneration %} renders its body through a
    # call block (so its own scope), and records where; the recording is not needed here.
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        call = self.call_method("_generation_support")
        return jinja2.nodes.CallBlock(call, [], [], body).set_lineno(lineno)

    def _generation_support(self, caller):
        return caller()


def compile_template(source):
    def raise_exception(message):
        raise Raised(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    now = int(os.environ.get("SF_JINJA_NOW", "0"))

    def strftime_now(fmt):
        return datetime.datetime.fromtimestamp(now, datetime.timezone.utc).strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[AssistantTracker, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env.from_string(source)


# Special tokens by family: a template named like the key gets these (else the generic pair).
FAMILY_TOKENS = [
    ("Llama-3", ("<|begin_of_text|>", "<|eot_id|>")),
    ("llama-3", ("<|begin_of_text|>", "<|eot_id|>")),
    ("Hermes", ("<|begin_of_text|>", "<|im_end|>")),
    ("DeepSeek-R1-Distill-Llama", ("<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>")),
    ("DeepSeek", ("<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>")),
    ("deepseek", ("<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>")),
    ("Qwen", ("", "<|im_end|>")),
    ("SmolLM3", ("", "<|im_end|>")),
    ("Mistral", ("<s>", "</s>")),
    ("mistral", ("<s>", "</s>")),
    ("Phi-3", ("<s>", "<|endoftext|>")),
    ("gemma", ("<bos>", "<eos>")),
]


def make_context(template_path, conv_path):
    with open(conv_path, encoding="utf-8") as f:
        conv = json.load(f)
    name = os.path.basename(template_path)
    bos, eos = "<s>", "</s>"
    for key, pair in FAMILY_TOKENS:
        if key in name:
            bos, eos = pair
            break
    ctx = {"messages": conv["messages"], "tools": conv.get("tools"),
           "documents": conv.get("documents"),
           "add_generation_prompt": conv.get("add_generation_prompt", False),
           "bos_token": bos, "eos_token": eos}
    for k, v in conv.get("kwargs", {}).items():
        ctx[k] = v
    return ctx


def context(template_path, conv_path):
    json.dump(make_context(template_path, conv_path), sys.stdout, ensure_ascii=False, indent=1)
    sys.stdout.write("\n")
    return 0


def render_source(source, ctx):
    """(status, rendering bytes, error message)"""
    try:
        out = compile_template(source).render(**ctx)
    except Raised as ex:
        return 2, b"", f"raise_exception: {ex}"
    except Exception as ex:  # what the template does wrong: the test compares that both failed
        return 3, b"", f"{type(ex).__name__}: {ex}"
    return 0, out.encode("utf-8", "surrogatepass"), ""


def render(template_path, ctx_path):
    with open(template_path, encoding="utf-8") as f:
        source = f.read()
    with open(ctx_path, encoding="utf-8") as f:
        ctx = json.load(f)
    rc, out, err = render_source(source, ctx)
    if err:
        print(err, file=sys.stderr)
    sys.stdout.buffer.write(out)
    return rc


def batch(outdir, rest):
    if "--" not in rest:
        print(__doc__, file=sys.stderr)
        return 1
    cut = rest.index("--")
    convs, templates = rest[:cut], rest[cut + 1:]
    for tp in templates:
        tname = os.path.basename(tp)
        tdir = os.path.join(outdir, tname)
        os.makedirs(tdir, exist_ok=True)
        with open(tp, encoding="utf-8") as f:
            source = f.read()
        for cp in convs:
            cname = os.path.splitext(os.path.basename(cp))[0]
            ctx = make_context(tp, cp)
            base = os.path.join(tdir, cname)
            with open(base + ".ctx", "w", encoding="utf-8") as f:
                json.dump(ctx, f, ensure_ascii=False, indent=1)
            rc, out, err = render_source(source, ctx)
            with open(base + ".out", "wb") as f:
                f.write(out)
            with open(base + ".rc", "w") as f:
                f.write(f"{rc}\n")
            with open(base + ".err", "w", encoding="utf-8") as f:
                f.write(err + "\n" if err else "")
    return 0


def main(argv):
    if len(argv) == 4 and argv[1] == "context":
        return context(argv[2], argv[3])
    if len(argv) == 4 and argv[1] == "render":
        return render(argv[2], argv[3])
    if len(argv) >= 3 and argv[1] == "batch":
        return batch(argv[2], argv[3:])
    print(__doc__, file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
