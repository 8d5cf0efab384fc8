"""A capturing TCP relay between a client and the proxy: every byte the proxy sends is recorded, so tests
check the wire itself rather than a code path."""

from __future__ import annotations

import socket
import threading


class CapturingRelay:
    """Listens on a free local port and forwards to (host, port), recording server-to-client bytes."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.port = int(self.listener.getsockname()[1])
        self.lock = threading.Lock()
        self.from_server = bytearray()     # all connections, in arrival order
        self.connections: list[bytearray] = []
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=10)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            capture = bytearray()
            with self.lock:
                self.connections.append(capture)
            threading.Thread(target=self._pump, args=(client, upstream, None), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, capture), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, capture: bytearray | None) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if capture is not None:
                    with self.lock:
                        capture += data
                        self.from_server += data
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def mark(self) -> int:
        """Current length of the capture, to cut out what one statement produced."""
        with self.lock:
            return len(self.from_server)

    def since(self, mark: int) -> bytes:
        with self.lock:
            return bytes(self.from_server[mark:])

    def close(self) -> None:
        self._closed = True
        self.listener.close()
