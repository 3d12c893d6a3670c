#!/usr/bin/env python3
"""A client that does not read: sends a streamed chat request asking for large chunks (20
top logprobs a token) with a tiny receive buffer, sleeps, then reads what the head kept for
it. Prints: bytes read, whether a client_too_slow error event came, whether [DONE] came.
Usage: slow_client.py PORT SEED SLEEP_S"""
import json, socket, sys, time

port, seed, pause = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
s.connect(("127.0.0.1", port))
body = json.dumps({"model": "sim-1", "stream": True, "logprobs": True, "top_logprobs": 20,
                   "max_tokens": 4096, "seed": seed,
                   "messages": [{"role": "user", "content": "tell me a long story"}]}).encode()
s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
          b"Content-Length: %d\r\n\r\n" % len(body) + body)
time.sleep(pause)
data = b""
s.settimeout(5)
while True:
    try:
        b = s.recv(65536)
    except socket.timeout:
        break
    if not b:
        break
    data += b
    if b"[DONE]" in data:
        break
t = data.decode(errors="replace")
print(len(data), "client_too_slow" in t, "[DONE]" in t)
