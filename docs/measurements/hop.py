"""What one extra process hop costs on this machine, as a function of how long the far end
takes to answer. No Stoker, no engine: a server that answers after D ms, a byte relay in its
own process, a client that times direct vs relayed round trips, interleaved."""
import asyncio
import multiprocessing
import socket
import statistics
import sys
import time


def server(port_q, delay_q):
    async def main():
        async def handle(r, w):
            while True:
                data = await r.readexactly(8)
                d = int.from_bytes(data, "big") / 1e6
                if d:
                    await asyncio.sleep(d)
                w.write(b"x" * 64)
                await w.drain()
        s = await asyncio.start_server(handle, "127.0.0.1", 0)
        port_q.put(s.sockets[0].getsockname()[1])
        await s.serve_forever()
    asyncio.run(main())


def relay(up_port, port_q):
    async def main():
        async def handle(r, w):
            ur, uw = await asyncio.open_connection("127.0.0.1", up_port)
            uw.transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            async def pipe(a, b):
                while True:
                    data = await a.read(65536)
                    if not data:
                        return
                    b.write(data)
            await asyncio.gather(pipe(r, uw), pipe(ur, w))
        s = await asyncio.start_server(handle, "127.0.0.1", 0)
        port_q.put(s.sockets[0].getsockname()[1])
        await s.serve_forever()
    asyncio.run(main())


def q50(v):
    return statistics.median(v) * 1e3


def q99(v):
    return sorted(v)[int(len(v) * 0.99) - 1] * 1e3


def main():
    q = multiprocessing.Queue()
    ps = multiprocessing.Process(target=server, args=(q, None), daemon=True)
    ps.start()
    sport = q.get()
    pr = multiprocessing.Process(target=relay, args=(sport, q), daemon=True)
    pr.start()
    rport = q.get()
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 150

    def conn(port):
        c = socket.create_connection(("127.0.0.1", port))
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return c

    d, r = conn(sport), conn(rport)

    def rt(c, delay_us):
        t0 = time.perf_counter()
        c.sendall(delay_us.to_bytes(8, "big"))
        got = 0
        while got < 64:
            got += len(c.recv(64 - got))
        return time.perf_counter() - t0

    print(f"{'far end takes':>14} {'direct p50':>11} {'relayed p50':>12} {'added p50':>10} {'added p99':>10}")
    for delay_ms in (0, 1, 5, 20, 50):
        us = delay_ms * 1000
        for _ in range(10):
            rt(d, us), rt(r, us)
        a, b = [], []
        for i in range(n):
            if i % 2:
                a.append(rt(d, us))
                b.append(rt(r, us))
            else:
                b.append(rt(r, us))
                a.append(rt(d, us))
        print(f"{delay_ms:>11} ms {q50(a):>8.3f} ms {q50(b):>9.3f} ms {q50(b) - q50(a):>7.3f} ms "
              f"{q99(b) - q99(a):>7.3f} ms")


if __name__ == "__main__":
    main()
