#!/usr/bin/env python3
"""Copies a GGUF file with one edit, for the tests of files the engine must refuse:
  gguf_edit.py IN OUT --arch NAME           general.architecture set to NAME
  gguf_edit.py IN OUT --type TENSOR TYPE    TENSOR stored as ggml type number TYPE (its data
                                            zeros of that type's size), the rest as it was
  gguf_edit.py IN OUT --rename TENSOR NAME  TENSOR named NAME
  gguf_edit.py IN OUT --drop-merges N      the last N of tokenizer.ggml.merges left out (the
                                            same tokens, another tokenizer)
  gguf_edit.py IN OUT --set-u32 KEY VALUE   KEY set to the uint32 VALUE (added when absent)
  gguf_edit.py IN OUT --set-f32 KEY VALUE   KEY set to the float32 VALUE (added when absent)
  gguf_edit.py IN OUT --set-bool KEY 0|1    KEY set to the bool VALUE (added when absent)
  gguf_edit.py IN OUT --set-str KEY VALUE   KEY set to the string VALUE (added when absent)
  gguf_edit.py IN OUT --set-str-esc KEY V   the same, V's backslash escapes undone (\\x00: NUL)
  gguf_edit.py IN OUT --set-u64 KEY VALUE   KEY set to the uint64 VALUE (added when absent)
  gguf_edit.py IN OUT --set-u32-arr KEY N V KEY set to an array of N uint32 V (added when absent)
  gguf_edit.py IN OUT --set-u32-list KEY A,B,...  KEY set to the array of uint32 A, B, ...
  gguf_edit.py IN OUT --copy TENSOR NAME    a copy of TENSOR added as NAME
  gguf_edit.py IN OUT --fill TENSOR BYTE    TENSOR's data every byte BYTE (0xff: an F32
                                            tensor all NaN)
  gguf_edit.py IN OUT --token ID TEXT       token ID's text (tokenizer.ggml.tokens) set to TEXT
  gguf_edit.py IN OUT --token-type ID TYPE  token ID's type (tokenizer.ggml.token_type) set to
                                            TYPE (3: control, 4: user-defined)
The key/value pairs and the other tensors' bytes are copied unchanged; offsets are laid out
again at the file's alignment."""
import struct
import sys

# ggml's block layouts: type number -> (elements per block, bytes per block)
SIZES = {0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34),
         9: (32, 36), 10: (256, 84), 11: (256, 110), 12: (256, 144), 13: (256, 176),
         14: (256, 210), 15: (256, 292), 24: (1, 1), 25: (1, 2), 26: (1, 4), 27: (1, 8),
         28: (1, 8), 30: (1, 2), 16: (256, 66), 19: (256, 50), 34: (256, 54), 20: (32, 18), 23: (256, 136), 39: (32, 17),
         17: (256, 74), 18: (256, 98), 21: (256, 110), 22: (256, 82), 29: (256, 56),
         35: (256, 66)}
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
        """The raw bytes of one value of type t (arrays whole)."""
        start = self.p
        if t == 8:
            self.string()
        elif t == 9:
            et, n = self.take("<I"), self.take("<Q")
            for _ in range(n):
                self.value(et)
        else:
            self.p += struct.calcsize(SCALAR[t])
        return self.d[start:self.p]


def pack_string(s):
    return struct.pack("<Q", len(s)) + s


def main():
    src, dst, what = sys.argv[1], sys.argv[2], sys.argv[3]
    data = open(src, "rb").read()
    r = Reader(data)
    if data[:4] != b"GGUF":
        sys.exit("not a GGUF file: " + src)
    r.p = 4
    version, n_tensors, n_kv = r.take("<I"), r.take("<Q"), r.take("<Q")
    kvs, align = [], 32
    for _ in range(n_kv):
        key, t = r.string(), r.take("<I")
        raw = r.value(t)
        if key == b"general.alignment":
            align = struct.unpack("<I", raw)[0]
        if what == "--arch" and key == b"general.architecture":
            raw = pack_string(sys.argv[4].encode())
        if what == "--drop-merges" and key == b"tokenizer.ggml.merges":
            m = Reader(raw)
            et, n = m.take("<I"), m.take("<Q")
            items = [m.value(et) for _ in range(n)]
            keep = items[:max(0, n - int(sys.argv[4]))]
            raw = struct.pack("<IQ", et, len(keep)) + b"".join(keep)
        if what == "--token" and key == b"tokenizer.ggml.tokens":
            m = Reader(raw)
            et, n = m.take("<I"), m.take("<Q")
            items = [m.value(et) for _ in range(n)]
            items[int(sys.argv[4])] = pack_string(sys.argv[5].encode())
            raw = struct.pack("<IQ", et, n) + b"".join(items)
        if what == "--token-type" and key == b"tokenizer.ggml.token_type":
            m = Reader(raw)
            et, n = m.take("<I"), m.take("<Q")
            items = [m.value(et) for _ in range(n)]
            items[int(sys.argv[4])] = struct.pack("<i", int(sys.argv[5]))
            raw = struct.pack("<IQ", et, n) + b"".join(items)
        if what.startswith("--set-") and key == sys.argv[4].encode():
            continue  # set below
        kvs.append((key, t, raw))
    if what.startswith("--set-"):
        k, v = sys.argv[4].encode(), sys.argv[5]
        kvs.append({"--set-u32": lambda: (k, 4, struct.pack("<I", int(v))),
                    "--set-f32": lambda: (k, 6, struct.pack("<f", float(v))),
                    "--set-bool": lambda: (k, 7, struct.pack("<B", int(v))),
                    "--set-str": lambda: (k, 8, pack_string(v.encode())),
                    "--set-str-esc": lambda: (k, 8, pack_string(
                        v.encode().decode("unicode_escape").encode("latin-1"))),
                    "--set-u64": lambda: (k, 10, struct.pack("<Q", int(v))),
                    "--set-u32-arr": lambda: (k, 9, struct.pack("<IQ", 4, int(v)) +
                                              struct.pack("<I", int(sys.argv[6])) * int(v)),
                    "--set-u32-list": lambda: (k, 9, struct.pack("<IQ", 4, len(v.split(","))) +
                                               b"".join(struct.pack("<I", int(x))
                                                        for x in v.split(","))),
                    }[what]())
        n_kv = len(kvs)
    tensors = []
    for _ in range(n_tensors):
        name, nd = r.string(), r.take("<I")
        dims = [r.take("<Q") for _ in range(nd)]
        tensors.append([name, dims, r.take("<I"), r.take("<Q")])
    base = (r.p + align - 1) // align * align
    if what == "--copy":
        src_t = [x for x in tensors if x[0].decode() == sys.argv[4]]
        if not src_t:
            sys.exit("no tensor named " + sys.argv[4])
        tensors.append([sys.argv[5].encode()] + src_t[0][1:])
        n_tensors += 1
    found = False
    out_info, blobs, at = [], [], 0
    for i, (name, dims, t, off) in enumerate(tensors):
        elems = 1
        for x in dims:
            elems *= x
        blk, nb = SIZES[t]
        size = elems // blk * nb
        blob = data[base + off:base + off + size]
        if what == "--rename" and name.decode() == sys.argv[4]:
            name, found = sys.argv[5].encode(), True
        if what == "--fill" and name.decode() == sys.argv[4]:
            blob, found = bytes([int(sys.argv[5], 0)]) * len(blob), True
        if what == "--type" and name.decode() == sys.argv[4]:
            t = int(sys.argv[5])
            blk, nb = SIZES[t]
            blob = bytes(elems // blk * nb)
            found = True
        out_info.append(pack_string(name) + struct.pack("<I", len(dims)) +
                        b"".join(struct.pack("<Q", x) for x in dims) + struct.pack("<IQ", t, at))
        blobs.append(blob)
        at += len(blob)
        at = (at + align - 1) // align * align
    if what in ("--type", "--rename", "--fill") and not found:
        sys.exit("no tensor named " + sys.argv[4])
    head = b"GGUF" + struct.pack("<IQQ", version, n_tensors, n_kv)
    head += b"".join(pack_string(k) + struct.pack("<I", t) + raw for k, t, raw in kvs)
    head += b"".join(out_info)
    with open(dst, "wb") as f:
        f.write(head + bytes(-len(head) % align))
        for b in blobs:
            f.write(b + bytes(-len(b) % align))


main()
