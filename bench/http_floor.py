"""The floor under bench/channels.py's first burst: how long does aiohttp alone (discord.py's HTTP
client, its connector as discord.py makes it: no connection limit) take to send N interaction
callbacks at once, on new connections and on kept-alive ones, with no gateway, no command tree and
no database around it?

A server process answers POST /interactions/{id}/{token}/callback with 204 (aiohttp's web server,
as the fake Discord); this process sends N of them at once (asyncio.gather), first on a fresh
session (every request opens its connection), then again on the same session (the connections
kept alive). Printed per round: when the first, the median and the last request body left (ms from
the start of the round, seen through aiohttp's request tracing, as the bot's acknowledgement
histogram sees them), when every answer was read, and this process's CPU time.

Run: PYTHONPATH=. python bench/http_floor.py [--n 500] [--rounds 3]
Figures: docs/performance.md, "500 busy channels on one bot process".
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import statistics
import time

import aiohttp
from aiohttp import web

BODY = b'{"type":5,"data":{"flags":64}}'  # a private deferral, as bot.parts.acks.think sends


def serve(port_out, ready) -> None:
    async def callback(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(status=204)

    async def main() -> None:
        app = web.Application()
        app.router.add_post("/interactions/{id}/{token}/callback", callback)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, backlog=4096)  # no SYN waits behind a full backlog
        await site.start()
        port_out.value = runner.addresses[0][1]
        ready.set()
        await asyncio.Event().wait()

    asyncio.run(main())


async def rounds(port: int, n: int, count: int) -> list[dict[str, float]]:
    sent: list[float] = []
    trace = aiohttp.TraceConfig()

    async def on_chunk(session, ctx, params) -> None:
        sent.append(time.perf_counter())

    trace.on_request_chunk_sent.append(on_chunk)
    found = []
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0), trace_configs=[trace]) as session:

        async def one(i: int) -> None:
            url = f"http://127.0.0.1:{port}/interactions/{i}/token/callback"
            async with session.post(url, data=BODY, headers={"Content-Type": "application/json"}) as r:
                await r.read()

        for k in range(count):
            sent.clear()
            t0, c0 = time.perf_counter(), time.process_time()
            await asyncio.gather(*(one(i) for i in range(n)))
            t1, c1 = time.perf_counter(), time.process_time()
            ms = sorted((t - t0) * 1000 for t in sent)
            found.append({"connections": "new" if k == 0 else "kept alive", "first": ms[0], "median": statistics.median(ms),
                          "last": ms[-1], "answered": (t1 - t0) * 1000, "cpu": (c1 - c0) * 1000})
    return found


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=500, help="callbacks sent at once")
    p.add_argument("--rounds", type=int, default=3, help="rounds on one session (the first on new connections)")
    args = p.parse_args()
    ctx = mp.get_context("spawn")
    port, ready = ctx.Value("i", 0), ctx.Event()
    server = ctx.Process(target=serve, args=(port, ready), daemon=True)
    server.start()
    try:
        if not ready.wait(30):
            raise SystemExit("the server did not start")
        found = asyncio.run(rounds(port.value, args.n, max(2, args.rounds)))
    finally:
        server.kill()
    print(f"{args.n} interaction callbacks at once, aiohttp {aiohttp.__version__}, one client process and one server process")
    print("| connections | first body sent | median | last | all answered | client CPU |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in found:
        print(f"| {r['connections']} | {r['first']:.0f} ms | {r['median']:.0f} ms | {r['last']:.0f} ms | {r['answered']:.0f} ms | {r['cpu']:.0f} ms |")


if __name__ == "__main__":
    main()
