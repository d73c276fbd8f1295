"""A plain TCP forwarder on loopback: a real server that is unreachable until the forwarder runs
(connection refused, as while Elasticsearch restarts), then byte for byte reachable."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator

__all__ = ["forwarder"]


@contextlib.contextmanager
def forwarder(port: int, target: tuple[str, int]) -> Iterator[None]:
    """127.0.0.1:port -> target, byte for byte, one thread pair per connection."""
    server = socket.create_server(("127.0.0.1", port))
    stop = threading.Event()

    def pipe(source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)

    def serve() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                client, _ = server.accept()
            except (TimeoutError, OSError):
                continue
            upstream = socket.create_connection(target)
            threading.Thread(target=pipe, args=(client, upstream), daemon=True).start()
            threading.Thread(target=pipe, args=(upstream, client), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(5)
        server.close()
