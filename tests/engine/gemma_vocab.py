#!/usr/bin/env python3
"""A Gemma-3-like SentencePiece vocabulary for test models, made from llama.cpp's bundled
models/ggml-vocab-gemma-4.gguf (the bundle has no Gemma 2/3 vocabulary):
  gemma_vocab.py GEMMA4_VOCAB OUT [--template FILE]
Gemma 4's 262,144 pieces (a BPE over the same '\u2581'-spaced pieces) become a
tokenizer.ggml.model "llama" (SentencePiece) vocabulary as Gemma 2/3 files have: each piece's
score is minus the rank of the merge that makes it (unmade pieces lowest), the byte pieces
<0x00>..<0xFF> its byte fallback; ids 105 and 106 become Gemma 3's <start_of_turn> and
<end_of_turn> (control tokens, as in Gemma 3), BOS 2, EOS 1, UNK 3, PAD 0, BOS added, no space
prefix. --template sets tokenizer.chat_template. The other metadata is not copied."""
import struct
import sys

SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<B", 10: "<Q",
          11: "<q", 12: "<d"}


class Reader:
    def __init__(self, data):
        self.d, self.p = data, 0

    def take(self, fmt):
        v = struct.unpack_from(fmt, self.d, self.p)[0]
        self.p += struct.calcsize(fmt)
        return v

    def string(self):
        n = self.take("<Q")
        s = self.d[self.p:self.p + n]
        self.p += n
        return s

    def value(self, t):
        if t == 8:
            return self.string()
        if t == 9:
            et, n = self.take("<I"), self.take("<Q")
            return [self.value(et) for _ in range(n)]
        return self.take(SCALAR[t])


def pstr(s):
    return struct.pack("<Q", len(s)) + s


def main():
    src, dst = sys.argv[1], sys.argv[2]
    template = None
    if len(sys.argv) > 4 and sys.argv[3] == "--template":
        template = open(sys.argv[4], "rb").read()
    r = Reader(open(src, "rb").read())
    if r.d[:4] != b"GGUF":
        sys.exit("not a GGUF file: " + src)
    r.p = 4
    _, _, n_kv = r.take("<I"), r.take("<Q"), r.take("<Q")
    kv = {}
    for _ in range(n_kv):
        key, t = r.string(), r.take("<I")
        kv[key] = r.value(t)
    tokens = list(kv[b"tokenizer.ggml.tokens"])
    types = list(kv[b"tokenizer.ggml.token_type"])
    index = {t: i for i, t in enumerate(tokens)}
    scores = [-1e9] * len(tokens)
    for rank, m in enumerate(kv[b"tokenizer.ggml.merges"]):
        a, b = m.split(b" ", 1)
        i = index.get(a + b)
        if i is not None and scores[i] == -1e9:
            scores[i] = -float(rank)
    for i, t in enumerate(types):
        if t != 1:
            scores[i] = 0.0
    tokens[105], tokens[106] = b"<start_of_turn>", b"<end_of_turn>"
    types[105] = types[106] = 3
    out = [
        (b"general.architecture", 8, pstr(b"llama")),
        (b"general.name", 8, pstr(b"gemma3-like vocabulary from ggml-vocab-gemma-4")),
        (b"tokenizer.ggml.model", 8, pstr(b"llama")),
        (b"tokenizer.ggml.tokens", 9,
         struct.pack("<IQ", 8, len(tokens)) + b"".join(pstr(t) for t in tokens)),
        (b"tokenizer.ggml.scores", 9,
         struct.pack("<IQ", 6, len(scores)) + b"".join(struct.pack("<f", s) for s in scores)),
        (b"tokenizer.ggml.token_type", 9,
         struct.pack("<IQ", 5, len(types)) + b"".join(struct.pack("<i", t) for t in types)),
        (b"tokenizer.ggml.bos_token_id", 4, struct.pack("<I", 2)),
        (b"tokenizer.ggml.eos_token_id", 4, struct.pack("<I", 1)),
        (b"tokenizer.ggml.unknown_token_id", 4, struct.pack("<I", 3)),
        (b"tokenizer.ggml.padding_token_id", 4, struct.pack("<I", 0)),
        (b"tokenizer.ggml.add_bos_token", 7, struct.pack("<B", 1)),
        (b"tokenizer.ggml.add_eos_token", 7, struct.pack("<B", 0)),
        (b"tokenizer.ggml.add_space_prefix", 7, struct.pack("<B", 0)),
    ]
    if template is not None:
        out.append((b"tokenizer.chat_template", 8, pstr(template)))
    head = b"GGUF" + struct.pack("<IQQ", 3, 0, len(out))
    head += b"".join(pstr(k) + struct.pack("<I", t) + v for k, t, v in out)
    with open(dst + ".tmp", "wb") as f:
        f.write(head + bytes(-len(head) % 32))
    import os
    os.replace(dst + ".tmp", dst)


main()
