#!/usr/bin/env python3
"""A fault-injecting TCP proxy for the fleet links: one listening port per target, each
connection forwarded byte for byte, with small random delays, and reset (RST, no goodbye)
after a random number of bytes, until the fault window ends; after it, connections pass
through untouched. Everything random comes from SEED.
Prints "LISTEN_PORT TARGET_PORT" per target once listening, then "resets N" on stderr as it
goes. Usage: fault_proxy.py SEED FAULT_SECONDS TARGET_PORT [TARGET_PORT...]
FAULT_BUDGET_MAX (default 60000) bounds the bytes a connection carries before its reset:
smaller makes more resets (a stress run; faults.sh passes it through)."""
import asyncio, os, random, socket, struct, sys, time

seed, window = int(sys.argv[1]), float(sys.argv[2])
targets = [int(p) for p in sys.argv[3:]]
rng = random.Random(seed)
t0 = time.monotonic()
resets = 0
budget_max = max(512, int(os.environ.get("FAULT_BUDGET_MAX", "60000")))


def faulty():
    return time.monotonic() - t0 < window


def rst(writer):
    sock = writer.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.close()


async def pump(reader, writer, budget, peer):
    global resets
    try:
        while True:
            data = await reader.read(rng.randint(1, 8192))
            if not data:
                break
            if faulty() and budget[0] <= len(data):
                cut = rng.randint(0, len(data))
                writer.write(data[:cut])
                await writer.drain()
                resets += 1
                print(f"resets {resets}", file=sys.stderr, flush=True)
                rst(writer)
                rst(peer)
                return
            budget[0] -= len(data)
            if faulty() and rng.random() < 0.2:
                await asyncio.sleep(rng.random() * 0.01)
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    try:
        writer.close()
    except OSError:
        pass


async def serve(target):
    async def handle(r, w):
        try:
            tr, tw = await asyncio.open_connection("127.0.0.1", target)
        except OSError:
            rst(w)
            return
        budget = [rng.randint(512, budget_max)]  # shared by both directions
        await asyncio.gather(pump(r, tw, budget, w), pump(tr, w, budget, tw))
    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


async def main():
    servers = []
    for t in targets:
        s, port = await serve(t)
        servers.append(s)
        print(port, t, flush=True)
    await asyncio.gather(*(s.serve_forever() for s in servers))


asyncio.run(main())
