"""The CPU an asyncio event loop spends to receive one small chunk after being idle.

A streamed answer arrives as deltas tens of milliseconds apart; each delta wakes the loop's
thread from idle. This measures that cost with nothing of callbench, the SDKs or aiohttp in the
way: a thread writes ``--chunks`` chunks of 60 bytes ``--gap`` seconds apart into a socket pair,
and the loop reads them (``--tcp``: a loopback TCP connection instead of the pair, as between
callbench and a local fake)

- ``protocol``: with a bare ``asyncio.Protocol`` whose ``data_received`` only counts (the loop's
  own work per chunk: the poll, the socket read, one callback);
- ``stream``: with an ``asyncio.StreamReader`` read by a task (the above plus waking a task per
  chunk, as any reader that takes deltas one at a time does).

Prints the thread CPU (``time.thread_time``: user and system time of the loop's thread) per chunk
for each of ``--rounds`` rounds. It is the floor under callbench's harness CPU per streamed
delta on the machine it runs on (docs/latency.md, "Harness CPU"). Name the machine and its load
(``uptime``) beside the figures: an idle machine's figures are the higher ones (its cores sleep
more deeply between chunks).

The loop is the one callbench's commands use (``runs/event_loop.py``: uvloop where installed;
``CALLBENCH_EVENT_LOOP=asyncio`` for the standard library's), named in the output.
``benchmarks/latency_bench.py`` calls :func:`protocol_floor` to put the floor beside its figures.

Run: ``python benchmarks/wakeup_floor.py [--gap 0.03] [--chunks 45] [--rounds 4] [--tcp]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import threading
import time

from callbench.runs import event_loop


def _pair(tcp: bool) -> tuple[socket.socket, socket.socket]:
    """(ours, theirs): a socket pair, or the two ends of a loopback TCP connection."""
    if not tcp:
        return socket.socketpair()
    with socket.create_server(("127.0.0.1", 0)) as server:
        ours = socket.create_connection(server.getsockname())
        theirs, _ = server.accept()
    return ours, theirs


def _send(sock: socket.socket, chunks: int, gap: float) -> None:
    for _ in range(chunks):
        time.sleep(gap)
        sock.sendall(b"x" * 60)
    sock.close()


class _Counter(asyncio.Protocol):
    def __init__(self, done: asyncio.Future[None]) -> None:
        self.done, self.n = done, 0

    def data_received(self, data: bytes) -> None:
        self.n += 1

    def eof_received(self) -> None:
        if not self.done.done():
            self.done.set_result(None)


async def _protocol_round(chunks: int, gap: float, tcp: bool = False) -> float:
    loop = asyncio.get_running_loop()
    ours, theirs = _pair(tcp)
    sender = threading.Thread(target=_send, args=(theirs, chunks, gap))
    done: asyncio.Future[None] = loop.create_future()
    transport, proto = await loop.connect_accepted_socket(lambda: _Counter(done), sock=ours)
    sender.start()
    t0 = time.thread_time()
    await done
    spent = time.thread_time() - t0
    transport.close()
    sender.join()
    return spent / max(1, proto.n)


async def _stream_round(chunks: int, gap: float, tcp: bool = False) -> float:
    ours, theirs = _pair(tcp)
    sender = threading.Thread(target=_send, args=(theirs, chunks, gap))
    reader, writer = await asyncio.open_connection(sock=ours)
    sender.start()
    t0, n = time.thread_time(), 0
    while await reader.read(65536):
        n += 1
    spent = time.thread_time() - t0
    writer.close()
    sender.join()
    return spent / max(1, n)


async def _main(args: argparse.Namespace) -> None:
    print(f"{args.chunks} chunks {1000 * args.gap:g} ms apart over {'TCP' if args.tcp else 'a socket pair'}; "
          f"event loop {event_loop.describe()}; load {os.getloadavg()[0]:.1f}")
    for name, fn in (("protocol", _protocol_round), ("stream", _stream_round)):
        per = [await fn(args.chunks, args.gap, args.tcp) for _ in range(args.rounds)]
        print(f"{name}: " + ", ".join(f"{1e6 * x:.0f}" for x in per)
              + f" us of thread CPU per chunk (median {1e6 * statistics.median(per):.0f})")


async def protocol_floor(gap: float, chunks: int = 45, rounds: int = 3) -> float:
    """The median over ``rounds`` of the loop thread's CPU seconds per chunk for a bare protocol
    reading ``chunks`` chunks ``gap`` seconds apart over loopback TCP, on the running loop."""
    return statistics.median([await _protocol_round(chunks, gap, True) for _ in range(rounds)])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gap", type=float, default=0.03, help="seconds between chunks (default 0.03)")
    ap.add_argument("--chunks", type=int, default=45, help="chunks per round (default 45)")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--tcp", action="store_true", help="loopback TCP instead of a socket pair")
    args = ap.parse_args()
    event_loop.run(_main(args))


if __name__ == "__main__":
    main()
