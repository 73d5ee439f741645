"""The blocking client: the asyncio Client run on a private event loop in
a daemon thread, for programs that do not use asyncio."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from types import TracebackType
from typing import Any, Coroutine, Optional, TypeVar

from ._client import Client, dial, env
from ._envelope import DEFAULT_MAX_FRAME
from ._result import Result

T = TypeVar("T")


class _Loop:
    """An event loop running in its own daemon thread until stopped."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="capwire", daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Runs coro on the loop and waits for it; an exception in this thread
        while waiting (KeyboardInterrupt) cancels it."""
        fut = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return fut.result()
        except concurrent.futures.CancelledError:
            raise
        except BaseException:
            fut.cancel()
            raise

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()
        self.loop.close()


class BlockingClient:
    """A Client for synchronous programs: every method blocks. It is safe to
    call from several threads at once; their calls are multiplexed on one
    connection like the asyncio Client's. An exception raised in the
    calling thread while it waits (KeyboardInterrupt) cancels the call,
    which sends cancel to capbridge."""

    def __init__(self, loop: _Loop, client: Client) -> None:
        self._loop = loop
        self._client = client
        self._lock = threading.Lock()
        self._stopped = False
        #: The MCP servers the grant reaches.
        self.servers = client.servers

    @classmethod
    def dial(cls, socket_path: str, token: str, *, max_frame: int = DEFAULT_MAX_FRAME, max_in_flight: int = 1024,
             handshake_timeout: float = 10.0, write_timeout: float = 30.0) -> BlockingClient:
        """Like capwire.dial, blocking."""
        loop = _Loop()
        try:
            c = loop.run(dial(socket_path, token, max_frame=max_frame, max_in_flight=max_in_flight,
                              handshake_timeout=handshake_timeout, write_timeout=write_timeout))
        except BaseException:
            loop.stop()
            raise
        return cls(loop, c)

    @classmethod
    def from_env(cls, *, max_frame: int = DEFAULT_MAX_FRAME, max_in_flight: int = 1024,
                 handshake_timeout: float = 10.0, write_timeout: float = 30.0) -> BlockingClient:
        """Like capwire.from_env, blocking."""
        sock, tok = env()
        return cls.dial(sock, tok, max_frame=max_frame, max_in_flight=max_in_flight,
                        handshake_timeout=handshake_timeout, write_timeout=write_timeout)

    @property
    def closed(self) -> bool:
        return self._client.closed

    def call(self, server: str, tool: str, args: object = None, *, timeout: Optional[float] = None,
             traceparent: str = "") -> Result:
        """Like Client.call, blocking."""
        return self._loop.run(self._client.call(server, tool, args, timeout=timeout, traceparent=traceparent))

    def describe(self, server: str, *tools: str, timeout: Optional[float] = None) -> str:
        """Like Client.describe, blocking: the named tools' whole
        declarations, in Python."""
        return self._loop.run(self._client.describe(server, *tools, timeout=timeout))

    def search(self, query: str, limit: int = 0, *, timeout: Optional[float] = None) -> list[dict[str, Any]]:
        """Like Client.search, blocking: the granted tools matching query,
        best first."""
        return self._loop.run(self._client.search(query, limit, timeout=timeout))

    def read_resource(self, server: str, uri: str, *, timeout: Optional[float] = None) -> Result:
        """Like Client.read_resource, blocking."""
        return self._loop.run(self._client.read_resource(server, uri, timeout=timeout))

    def start(self, server: str, tool: str, args: object = None, *, timeout: Optional[float] = None) -> str:
        """Like Client.start, blocking: the background call's handle, at once."""
        return self._loop.run(self._client.start(server, tool, args, timeout=timeout))

    def collect(self, handle: str, *, timeout: Optional[float] = None) -> Result:
        """Like Client.collect, blocking: a timeout (or an exception in this
        thread while it waits) leaves the call running, to collect again."""
        return self._loop.run(self._client.collect(handle, timeout=timeout))

    def drop(self, handle: str, *, timeout: Optional[float] = None) -> None:
        """Like Client.drop, blocking."""
        self._loop.run(self._client.drop(handle, timeout=timeout))

    def close(self) -> None:
        """Closes the connection and stops the loop thread. Idempotent."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
        self._loop.run(self._client.close())
        self._loop.stop()

    def __enter__(self) -> BlockingClient:
        return self

    def __exit__(self, et: Optional[type[BaseException]], ev: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        self.close()


_shared: Optional[BlockingClient] = None
_shared_lock = threading.Lock()


def shared_blocking() -> BlockingClient:
    """The process-wide BlockingClient dialed from the environment on first
    use; if its connection has broken, the next call dials again."""
    global _shared
    with _shared_lock:
        if _shared is not None and not _shared.closed:
            return _shared
        if _shared is not None:
            _shared.close()
        _shared = BlockingClient.from_env()
        return _shared
