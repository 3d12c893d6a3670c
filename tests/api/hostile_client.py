#!/usr/bin/env python3
"""Raw-socket clients for tests/api/hostile.sh: shapes curl cannot make.

  hostile_client.py raw PORT HEX_OR_TEXT         one request as bytes; prints the status line
  hostile_client.py halfclose PORT BODY [MINOR]   a POST (HTTP/1.1 with Connection: close, or
                                                  HTTP/1.0 for MINOR 0), then shutdown(SHUT_WR);
                                                  prints the status, then the body
  hostile_client.py keyless PORT N BYTES          N connections each sending headers without a
                                                  key (a 30 MiB body declared, Expect:
                                                  100-continue), then BYTES of the body; prints
                                                  how many got 401 (not 100) before the body
  hostile_client.py silent PORT N SECS            N connections that send nothing (or one byte
                                                  a second); prints how many the head closed
                                                  within SECS
  hostile_client.py flood PORT N SECS [SRC]       N connections (from address SRC) that never
                                                  send, each the peer closes opened again, for
                                                  SECS; prints how many were opened again
Every wait is bounded; nothing here asserts times.
"""
import socket
import sys
import time


def connect(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    return s


def read_all(s, limit=10.0):
    s.settimeout(limit)
    out = b""
    end = time.monotonic() + limit
    try:
        while time.monotonic() < end:
            d = s.recv(65536)
            if not d:
                break
            out += d
    except (socket.timeout, ConnectionResetError):
        pass
    return out


def status_of(resp):
    line = resp.split(b"\r\n", 1)[0]
    parts = line.split(b" ")
    return parts[1].decode() if len(parts) > 1 else "none"


def cmd_raw(port, text):
    s = connect(port)
    s.sendall(text.encode("latin-1").decode("unicode_escape").encode("latin-1"))
    resp = read_all(s)
    print(status_of(resp))
    body = resp.split(b"\r\n\r\n", 1)[1] if b"\r\n\r\n" in resp else b""
    sys.stdout.buffer.write(body + b"\n")


def cmd_halfclose(port, body, minor):
    s = connect(port)
    b = body.encode()
    s.sendall(b"POST /v1/completions HTTP/1.%d\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"%sContent-Length: %d\r\n\r\n" % (minor, b"Connection: close\r\n" if minor else b"",
                                                  len(b)) + b)
    s.shutdown(socket.SHUT_WR)
    resp = read_all(s, 20.0)
    print(status_of(resp))
    sys.stdout.buffer.write(resp.split(b"\r\n\r\n", 1)[-1] + b"\n")


def head_of(s, limit):
    """The response bytes up to the end of the first header block, within limit seconds."""
    s.settimeout(0.2)
    out = b""
    end = time.monotonic() + limit
    while b"\r\n\r\n" not in out and time.monotonic() < end:
        try:
            d = s.recv(4096)
        except socket.timeout:
            continue
        except OSError:
            break
        if not d:
            break
        out += d
    return out


def cmd_keyless(port, n, nbytes):
    got = 0
    socks = []
    for _ in range(n):
        s = connect(port)
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Expect: 100-continue\r\nContent-Length: %d\r\n\r\n" % (30 << 20))
        socks.append(s)
    answers = [head_of(s, 3.0) for s in socks]
    chunk = b"x" * 65536
    for s in socks:  # the body, as far as the head takes it
        sent = 0
        try:
            s.settimeout(2)
            while sent < nbytes:
                sent += s.send(chunk[: min(len(chunk), nbytes - sent)])
        except OSError:
            pass
    time.sleep(0.5)
    for a in answers:
        if status_of(a) == "401":
            got += 1
    print(got)
    for s in socks:
        s.close()


def cmd_silent(port, n, secs, drip):
    socks = [connect(port) for _ in range(n)]
    end = time.monotonic() + secs
    closed = set()
    while time.monotonic() < end and len(closed) < n:
        for i, s in enumerate(socks):
            if i in closed:
                continue
            s.setblocking(False)
            try:
                if drip:
                    s.send(b"G" if drip == 1 else b"x")
                d = s.recv(65536)
                if not d:
                    closed.add(i)
            except BlockingIOError:
                pass
            except OSError:
                closed.add(i)
        time.sleep(0.5)
    print(len(closed))


def cmd_flood(port, n, secs, src):
    """n connections that never send, for secs seconds: each the peer closes is opened again."""
    import selectors
    sel = selectors.DefaultSelector()

    def opened():
        s = socket.socket()
        s.setblocking(False)
        try:
            s.bind((src, 0))
            s.connect(("127.0.0.1", port))
        except BlockingIOError:
            pass
        except OSError:
            s.close()
            return None
        sel.register(s, selectors.EVENT_READ)
        return s

    live = 0
    for _ in range(n):
        live += opened() is not None
    reopened = 0
    end = time.monotonic() + secs
    while time.monotonic() < end:
        for key, _ in sel.select(timeout=0.1):
            s = key.fileobj
            try:
                d = s.recv(4096)
            except BlockingIOError:
                continue
            except OSError:
                d = b""
            if d:
                continue
            sel.unregister(s)
            s.close()
            if opened() is not None:
                reopened += 1
    print(reopened)


def main():
    cmd = sys.argv[1]
    port = int(sys.argv[2])
    if cmd == "raw":
        cmd_raw(port, sys.argv[3])
    elif cmd == "halfclose":
        cmd_halfclose(port, sys.argv[3], int(sys.argv[4]) if len(sys.argv) > 4 else 1)
    elif cmd == "keyless":
        cmd_keyless(port, int(sys.argv[3]), int(sys.argv[4]))
    elif cmd == "flood":
        cmd_flood(port, int(sys.argv[3]), float(sys.argv[4]),
                  sys.argv[5] if len(sys.argv) > 5 else "127.0.0.1")
    elif cmd == "silent":
        cmd_silent(port, int(sys.argv[3]), float(sys.argv[4]),
                   int(sys.argv[5]) if len(sys.argv) > 5 else 0)
    else:
        sys.exit("unknown command " + cmd)


if __name__ == "__main__":
    main()
