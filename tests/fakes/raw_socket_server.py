"""A raw-socket server on loopback for transport tests: it reads each request whole and answers
with bytes (or silence) a test chooses, below HTTP, where no HTTP server library would go."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable, Iterator

from waiting import limit


def read_request(conn: socket.socket) -> None:
    """Read one whole request (head and Content-Length body), so that closing the socket sends a
    FIN, not the RST that unread data causes (which would be a reset of the test's own making)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(1 << 16)
        if not chunk:
            return
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(body) < length:
        chunk = conn.recv(1 << 16)
        if not chunk:
            return
        body += chunk


@contextlib.contextmanager
def raw_socket_server(answer: Callable[[socket.socket, int], None], *,
                      connections: int = 64) -> Iterator[int]:
    """Serve on a loopback port (yielded): each of at most ``connections`` connections is read
    (:func:`read_request`) and answered by ``answer(conn, port)`` on its own daemon thread, then
    closed; the listening socket is closed on exit. ``OSError`` in ``answer`` (the client gone) is
    ignored."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(32)
    port = server.getsockname()[1]

    def handle(conn: socket.socket) -> None:
        try:
            # a safety net only: the client may be slow to send on a loaded machine, and a timeout
            # here would close the socket and turn any answer into a reset
            conn.settimeout(limit(60.0))
            read_request(conn)
            answer(conn, port)
        except OSError:
            pass
        finally:
            conn.close()

    def serve() -> None:
        for _ in range(connections):
            try:
                conn, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=handle, args=(conn,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield port
    finally:
        server.close()
