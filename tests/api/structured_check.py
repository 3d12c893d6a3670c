#!/usr/bin/env python3
"""A JSON Schema validator of its own (the standard library only: CI machines need not have
python3-jsonschema), for gguf_structured.sh: structured_check.py SCHEMA SAMPLES, SAMPLES one
JSON line per sample {"text": ..., "finish": ...}. Each text must parse as strict JSON and
validate against the schema (draft 2020-12 semantics for the keywords below), each finish must
be "stop". Prints a line per failure and a summary; exits 1 on any failure.

Keywords: type, enum, const, anyOf, oneOf, allOf, $ref (#, #/$defs/..., #/definitions/...),
properties, required, additionalProperties, items, prefixItems, minItems, maxItems,
uniqueItems, minLength, maxLength (code points), pattern (re.search), format (date, time,
date-time, uuid, email, ipv4), minimum, maximum, exclusiveMinimum, exclusiveMaximum,
multipleOf. Any other keyword is an error of the test's own schema."""
import datetime
import ipaddress
import json
import math
import re
import sys
import uuid

ANNOTATIONS = {"title", "description", "default", "examples", "$schema", "$id", "$comment",
               "$defs", "definitions", "strict"}


def parse_strict(text):
    def bad_constant(c):
        raise ValueError("non-JSON constant " + c)
    return json.loads(text, parse_constant=bad_constant)


def type_ok(v, t):
    if t == "object":
        return isinstance(v, dict)
    if t == "array":
        return isinstance(v, list)
    if t == "string":
        return isinstance(v, str)
    if t == "boolean":
        return isinstance(v, bool)
    if t == "null":
        return v is None
    if t == "integer":
        return (isinstance(v, int) and not isinstance(v, bool)) or (
            isinstance(v, float) and v.is_integer())
    if t == "number":
        return isinstance(v, (int, float)) and not isinstance(v, bool)
    raise ValueError("unknown type " + t)


def same(a, b):
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return a == b


def format_ok(v, f):
    try:
        if f == "date":
            return bool(re.fullmatch(r"\d{4}-\d{2}-\d{2}", v)) and bool(
                datetime.date.fromisoformat(v))
        if f == "time":
            return bool(re.fullmatch(r"\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})", v)) and bool(
                datetime.time.fromisoformat(v.replace("Z", "+00:00")))
        if f == "date-time":
            return bool(re.fullmatch(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})",
                                     v)) and bool(datetime.datetime.fromisoformat(v.replace("Z", "+00:00")))
        if f == "uuid":
            return bool(re.fullmatch(r"[0-9a-fA-F]{8}-([0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}", v)) and bool(
                uuid.UUID(v))
        if f == "email":
            return bool(re.fullmatch(r"[^@\s]+@[^@\s]+\.[^@\s]+", v))
        if f == "ipv4":
            return bool(ipaddress.IPv4Address(v))
    except ValueError:
        return False
    raise ValueError("unknown format " + f)


class Validator:
    def __init__(self, root):
        self.root = root

    def ref(self, r):
        if r == "#":
            return self.root
        for p in ("#/$defs/", "#/definitions/"):
            if r.startswith(p):
                return self.root[p[2:-1]][r[len(p):]]
        raise ValueError("unsupported $ref " + r)

    def errors(self, v, s, path="$"):
        if s is True or s == {}:
            return []
        if s is False:
            return [path + ": false schema"]
        errs = []
        for k in s:
            if k not in ANNOTATIONS and k not in KEYWORDS:
                raise ValueError("the test's schema uses " + k)
        if "$ref" in s:
            errs += self.errors(v, self.ref(s["$ref"]), path)
        if "type" in s:
            ts = s["type"] if isinstance(s["type"], list) else [s["type"]]
            if not any(type_ok(v, t) for t in ts):
                return [f"{path}: not of type {s['type']}: {v!r}"]
        if "enum" in s and not any(same(v, e) for e in s["enum"]):
            errs.append(f"{path}: {v!r} not in enum")
        if "const" in s and not same(v, s["const"]):
            errs.append(f"{path}: {v!r} is not the const")
        if "anyOf" in s and not any(not self.errors(v, x, path) for x in s["anyOf"]):
            errs.append(f"{path}: matches no anyOf branch")
        if "oneOf" in s and sum(not self.errors(v, x, path) for x in s["oneOf"]) != 1:
            errs.append(f"{path}: not exactly one oneOf branch")
        for x in s.get("allOf", []):
            errs += self.errors(v, x, path)
        if isinstance(v, dict):
            props = s.get("properties", {})
            for r in s.get("required", []):
                if r not in v:
                    errs.append(f"{path}: required {r} missing")
            for k, x in v.items():
                if k in props:
                    errs += self.errors(x, props[k], f"{path}.{k}")
                elif "additionalProperties" in s:
                    errs += self.errors(x, s["additionalProperties"], f"{path}.{k}")
        if isinstance(v, list):
            pre = s.get("prefixItems", [])
            for i, x in enumerate(v):
                if i < len(pre):
                    errs += self.errors(x, pre[i], f"{path}[{i}]")
                elif "items" in s:
                    errs += self.errors(x, s["items"], f"{path}[{i}]")
            if len(v) < s.get("minItems", 0) or len(v) > s.get("maxItems", math.inf):
                errs.append(f"{path}: {len(v)} items")
            if s.get("uniqueItems") and len({json.dumps(x, sort_keys=True) for x in v}) != len(v):
                errs.append(f"{path}: items not unique")
        if isinstance(v, str):
            if len(v) < s.get("minLength", 0) or len(v) > s.get("maxLength", math.inf):
                errs.append(f"{path}: length {len(v)}")
            if "pattern" in s and not re.search(s["pattern"], v):
                errs.append(f"{path}: {v!r} does not match {s['pattern']}")
            if "format" in s and not format_ok(v, s["format"]):
                errs.append(f"{path}: {v!r} is not a {s['format']}")
        if type_ok(v, "number"):
            if "minimum" in s and v < s["minimum"]:
                errs.append(f"{path}: {v} < minimum")
            if "maximum" in s and v > s["maximum"]:
                errs.append(f"{path}: {v} > maximum")
            if "exclusiveMinimum" in s and v <= s["exclusiveMinimum"]:
                errs.append(f"{path}: {v} <= exclusiveMinimum")
            if "exclusiveMaximum" in s and v >= s["exclusiveMaximum"]:
                errs.append(f"{path}: {v} >= exclusiveMaximum")
            if "multipleOf" in s and (v / s["multipleOf"]) % 1:
                errs.append(f"{path}: {v} not a multiple")
        return errs


KEYWORDS = {"type", "enum", "const", "anyOf", "oneOf", "allOf", "$ref", "properties", "required",
            "additionalProperties", "items", "prefixItems", "minItems", "maxItems", "uniqueItems",
            "minLength", "maxLength", "pattern", "format", "minimum", "maximum",
            "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}


def main():
    schema = json.load(open(sys.argv[1], encoding="utf-8"))
    val = Validator(schema)
    n = bad = 0
    for line in open(sys.argv[2], encoding="utf-8"):
        sample = json.loads(line)
        n += 1
        why = []
        if sample["finish"] != "stop":
            why.append("finish_reason " + str(sample["finish"]))
        try:
            why += val.errors(parse_strict(sample["text"]), schema)
        except ValueError as e:
            why.append("does not parse: " + str(e))
        if why:
            bad += 1
            print(f"sample {n}: {'; '.join(why)[:300]}\n  text: {sample['text'][:300]!r}")
    print(f"{n} samples, {n - bad} valid, {bad} invalid")
    return 0 if n and not bad else 1


if __name__ == "__main__":
    sys.exit(main())
