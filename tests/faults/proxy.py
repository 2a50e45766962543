"""A loopback TCP forwarder that stands in for an engine that can go down and come back.

`Proxy(port)` listens on a free 127.0.0.1 port and forwards every connection
to the real engine. `stop()` closes the listener and every forwarded
connection, so the address refuses connections exactly like a stopped
engine; `start()` listens on the same port again. `stall()` keeps the
connections open but forwards nothing more, like an engine that stopped
answering (SIGSTOP). The shared engines are never touched.
"""

from __future__ import annotations

import socket
import threading


def proxy_every_instance(shared: dict[str, dict]) -> tuple[dict[str, "Proxy"], dict[str, dict]]:
    """A started proxy per shared instance, and the instances as the stack config names them through it."""
    proxies = {name: Proxy(int(instance["port"])).start() for name, instance in shared.items()}
    return proxies, {name: {**instance, "port": proxies[name].port} for name, instance in shared.items()}


class Proxy:
    def __init__(self, target_port: int, host: str = "127.0.0.1", listen: str | None = None) -> None:
        """`listen`: the address to listen on when not `host` (`::1`: an engine reached over IPv6)."""
        self.host, self.target = listen or host, (host, target_port)
        self.port = 0
        self._listener: socket.socket | None = None
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._forwarding = threading.Event()
        self._forwarding.set()

    @property
    def address(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    def start(self) -> "Proxy":
        listener = socket.socket(socket.AF_INET6 if ":" in self.host else socket.AF_INET)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((self.host, self.port))  # port 0 the first time, the same port afterwards
        listener.listen(64)
        self.port, self._listener = listener.getsockname()[1], listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()
        return self

    def stall(self) -> None:
        """Stop forwarding but keep every connection open: a server that stopped answering (SIGSTOP, a partition)."""
        self._forwarding.clear()

    def stop(self) -> None:
        """Refuse new connections and cut the forwarded ones."""
        with self._lock:
            listener, self._listener = self._listener, None
            sockets, self._open = self._open, set()
        for sock in ([listener] if listener else []) + list(sockets):
            _close(sock)
        self._forwarding.set()  # a stalled pipe wakes to its closed socket and ends

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # the listener was closed by stop()
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                _close(client)
                continue
            upstream.settimeout(None)
            with self._lock:
                if self._listener is not listener:  # stopped meanwhile
                    _close(client), _close(upstream)
                    return
                self._open.update((client, upstream))
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(src, dst), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                self._forwarding.wait()
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                _close(sock)
                with self._lock:
                    self._open.discard(sock)


def _close(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()
