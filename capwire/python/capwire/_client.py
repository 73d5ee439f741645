"""The asyncio client: one connection to capbridge's call socket, with any
number of calls multiplexed on it by id (docs/capwire.md, "The
conversation")."""

from __future__ import annotations

import asyncio
import math
import os
import weakref
from types import TracebackType
from typing import Any, Optional

from ._envelope import (CAP_BRIDGE, CAP_PREFIX, DEFAULT_MAX_FRAME, VERSION, ClientMsg, DeniedMsg, FatalMsg, ResultMsg, Welcome,
                        decode, encode_args, encode_call, encode_cancel, encode_hello, known_type)
from ._errors import CapwireError, Closed, Denied, Fatal, NoEnv, WireError
from ._codes import BAD_FRAME, FRAME_TOO_LARGE
from ._result import Result

#: Environment variables a jailed program finds capbridge by.
ENV_SOCKET = "CAPBRIDGE_SOCKET"
ENV_TOKEN = "CAPBRIDGE_TOKEN"


async def _read_frame(r: asyncio.StreamReader, max_frame: int) -> Optional[bytes]:
    """Reads one frame's payload; None at an orderly end of stream (between
    frames). The length is checked before the payload is read, and the
    reader holds only the bytes that have arrived, so a peer announcing
    16 MiB and sending 10 bytes costs 10 bytes."""
    try:
        prefix = await r.readexactly(4)
    except asyncio.IncompleteReadError as e:
        if not e.partial:
            return None
        raise WireError(BAD_FRAME, True, "stream ended inside a length prefix") from None
    n = int.from_bytes(prefix, "big")
    if n == 0:
        raise WireError(BAD_FRAME, True, "zero-length frame")
    if n > max_frame:
        raise WireError(FRAME_TOO_LARGE, True, f"frame of {n} bytes exceeds the limit of {max_frame}")
    try:
        return await r.readexactly(n)
    except asyncio.IncompleteReadError:
        raise WireError(BAD_FRAME, True, f"stream ended inside a frame of {n} bytes") from None


class Client:
    """A connection to capbridge's call socket, bound to the event loop that
    dialed it. Calls run concurrently and are answered in any order; each
    settles exactly once. When the connection breaks (capbridge hung up or
    sent a fatal frame, a frame was broken, a write failed or stalled),
    every waiting call, and every later one, raises Closed, whose
    __cause__ says why. Use dial, from_env or shared to get one."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, servers: tuple[str, ...],
                 max_frame: int, max_in_flight: int, write_timeout: float) -> None:
        #: The MCP servers the grant reaches, as the welcome named them.
        self.servers = servers
        self._reader = reader
        self._writer = writer
        self._max_frame = max_frame
        self._write_timeout = write_timeout
        self._slots = asyncio.Semaphore(max_in_flight)
        self._pending: dict[int, asyncio.Future[Result]] = {}
        self._next_id = 1
        self._why: Optional[str] = None
        self._cause: Optional[BaseException] = None
        self._read_task = asyncio.get_running_loop().create_task(self._read_loop())

    @property
    def closed(self) -> bool:
        """Whether the connection is gone (closed, or broken)."""
        return self._why is not None

    def _closed(self) -> Closed:
        err = Closed(self._why or "")
        err.__cause__ = self._cause
        return err

    async def call(self, server: str, tool: str, args: object = None, *, timeout: Optional[float] = None,
                   traceparent: str = "") -> Result:
        """Invokes tool on MCP server (the capability "mcp."+server). args is
        a dict (None means {}; see encode_args for what it may hold).
        Returns the Result when the tool ran (is_error set if it failed);
        raises Denied when capbridge refused the call and Closed when the
        connection is gone. timeout, in seconds, is sent as timeout_ms;
        when it passes here first the call sends cancel and raises
        TimeoutError, when capbridge's timer wins, Denied coded timeout.
        Cancelling the task that awaits the call sends cancel. traceparent,
        the W3C trace context of the program's span making the call, is
        sent as the call's traceparent: capbridge's span becomes its child,
        and the MCP server's request carries capbridge's span as
        _meta.traceparent."""
        return await self._invoke(CAP_PREFIX + server, tool, args, timeout, traceparent)

    async def describe(self, server: str, *tools: str, timeout: Optional[float] = None) -> str:
        """The whole declarations, in Python, of the named tools of server
        (by function or wire name; none: every tool the grant allows)."""
        r = await self._invoke(CAP_BRIDGE, "describe", {"server": server, "tools": list(tools), "lang": "python"}, timeout)
        return r.text()

    async def search(self, query: str, limit: int = 0, *, timeout: Optional[float] = None) -> list[dict[str, Any]]:
        """The tools the grant allows that match query's words, best first,
        at most limit (0: ten): dicts with server, func, tool, signature
        and score."""
        r = await self._invoke(CAP_BRIDGE, "search", {"query": query, "limit": limit, "lang": "python"}, timeout)
        matches: list[dict[str, Any]] = r.structured["matches"]
        return matches

    async def read_resource(self, server: str, uri: str, *, timeout: Optional[float] = None) -> Result:
        """Reads the resource at uri from server, whose resources the grant
        must allow: each entry is a block of kind "resource" (uri, mime,
        text or data)."""
        return await self._invoke(CAP_BRIDGE, "read_resource", {"server": server, "uri": uri}, timeout)

    async def start(self, server: str, tool: str, args: object = None, *, timeout: Optional[float] = None) -> str:
        """Runs a call of tool (its wire name) on server in the background,
        within the grant, and returns its handle at once; collect waits for
        its result later. A grant holds at most 16 started calls not yet
        collected."""
        r = await self._invoke(CAP_BRIDGE, "start", {"server": server, "tool": tool, "args": args if args is not None else {}},
                               timeout)
        return r.text()

    async def collect(self, handle: str, *, timeout: Optional[float] = None) -> Result:
        """Waits for the result of the call started as handle, as call
        returns a call's result or raises its refusal; a timeout or
        cancellation leaves the call running, to collect again."""
        return await self._invoke(CAP_BRIDGE, "collect", {"handle": handle}, timeout)

    async def drop(self, handle: str, *, timeout: Optional[float] = None) -> None:
        """Cancels the call started as handle and forgets it."""
        await self._invoke(CAP_BRIDGE, "drop", {"handle": handle}, timeout)

    async def _invoke(self, cap: str, op: str, args: object, timeout: Optional[float], traceparent: str = "") -> Result:
        if self._why is not None:
            raise self._closed()
        timeout_ms = 0
        if timeout is not None:
            if not timeout > 0 or not math.isfinite(timeout):
                raise ValueError("capwire: timeout must be a positive number of seconds")
            timeout_ms = max(1, math.ceil(timeout * 1000))
        # Encoded before waiting for a slot: a bad argument fails at once.
        arg_bytes = encode_args(args)
        async with self._slots:
            if self._why is not None:
                raise self._closed()
            id = self._next_id
            self._next_id += 1
            frame = encode_call(id, cap, op, arg_bytes, timeout_ms, self._max_frame, traceparent)
            fut: asyncio.Future[Result] = asyncio.get_running_loop().create_future()
            self._pending[id] = fut
            try:
                await self._write(frame)
                if timeout is None:
                    return await fut
                done, _ = await asyncio.wait((fut,), timeout=timeout)
                if not done:
                    raise TimeoutError(f"capwire: call {cap.removeprefix(CAP_PREFIX)}/{op} timed out after {timeout_ms} ms")
                return fut.result()
            finally:
                # Still waiting (cancelled, timed out): tell capbridge to
                # abandon the call; its late reply is dropped.
                if self._pending.pop(id, None) is not None and self._why is None:
                    self._writer.write(encode_cancel(id, self._max_frame))

    async def _write(self, frame: bytes) -> None:
        self._writer.write(frame)
        # asyncio.wait, not wait_for: before Python 3.12, wait_for loses
        # the caller's cancellation when the awaited step finishes in the
        # same loop turn, and a cancelled call would wait for an answer
        # that never comes.
        drain = asyncio.ensure_future(self._writer.drain())
        try:
            done, _ = await asyncio.wait((drain,), timeout=self._write_timeout)
        finally:
            if not drain.done():
                drain.cancel()
        if not done:
            self._fail(f"writing: capbridge has not read for {self._write_timeout} s", None)
            raise self._closed()
        try:
            drain.result()
        except (ConnectionError, OSError) as e:
            self._fail("writing: " + str(e), e)
            raise self._closed() from None

    async def close(self) -> None:
        """Closes the connection: calls still waiting raise Closed. Idempotent."""
        self._fail("", None)
        if self._read_task is not asyncio.current_task():
            try:
                await self._read_task
            except asyncio.CancelledError:
                pass

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, et: Optional[type[BaseException]], ev: Optional[BaseException],
                        tb: Optional[TracebackType]) -> None:
        await self.close()

    def _fail(self, why: str, cause: Optional[BaseException]) -> None:
        """Stops the client; only the first failure counts."""
        if self._why is not None:
            return
        self._why, self._cause = why, cause
        pending = list(self._pending.values())
        self._pending.clear()
        for fut in pending:
            if not fut.done():
                fut.set_exception(self._closed())
        self._writer.close()
        if self._read_task is not asyncio.current_task():
            self._read_task.cancel()

    def _deliver(self, id: int, res: Optional[Result], err: Optional[BaseException]) -> None:
        # A reply to a call that was abandoned or never made is dropped.
        fut = self._pending.pop(id, None)
        if fut is None or fut.done():
            return
        if err is not None:
            fut.set_exception(err)
        elif res is not None:
            fut.set_result(res)

    async def _read_loop(self) -> None:
        try:
            while self._why is None:
                frame = await _read_frame(self._reader, self._max_frame)
                if frame is None:
                    self._fail("capbridge hung up", None)
                    return
                self._dispatch(frame)
        except WireError as e:
            self._fail(str(e), e)
        except (ConnectionError, OSError) as e:
            self._fail("reading: " + str(e), e)

    def _dispatch(self, frame: bytes) -> None:
        try:
            m = decode(frame)
        except WireError as e:
            if not e.fatal and e.type and not known_type(e.type):
                return  # from a newer capbridge (docs/capwire.md, "Versioning")
            if not e.fatal and e.id is not None:
                err = CapwireError("capwire: malformed reply: " + str(e))
                err.__cause__ = e
                self._deliver(e.id, None, err)
                return
            self._fail(str(e), e)
            return
        if isinstance(m, ResultMsg):
            self._deliver(m.id, m.result, None)
        elif isinstance(m, DeniedMsg):
            d = Denied(m.code, m.message, m.path, m.rpc_code, m.quota, m.retry_ms)
            if m.id is None:
                # capbridge could not tell which call it refused, so one of
                # ours will never be answered; only ending the connection
                # settles it.
                self._fail("capbridge refused a frame", d)
            else:
                self._deliver(m.id, None, d)
        elif isinstance(m, FatalMsg):
            f = Fatal(m.code, m.message)
            self._fail(str(f), f)
        else:
            t = m.t if isinstance(m, ClientMsg) else "welcome"
            self._fail(f'capbridge sent a "{t}" frame', None)


async def dial(socket_path: str, token: str, *, max_frame: int = DEFAULT_MAX_FRAME, max_in_flight: int = 1024,
               handshake_timeout: float = 10.0, write_timeout: float = 30.0) -> Client:
    """Connects to socket_path and performs the hello/welcome exchange with
    token. Bounds: max_frame is the largest frame payload read or written
    (16 MiB); max_in_flight the calls in flight at once (1024; a call
    beyond waits for a slot); handshake_timeout bounds connect and hello,
    write_timeout each write, in seconds. A refusal by capbridge raises
    the Fatal it sent (has_code(err, BAD_TOKEN), ...)."""
    max_frame = min(max_frame, 0xffffffff) if max_frame > 0 else DEFAULT_MAX_FRAME
    hello = encode_hello(token, max_frame)

    async def handshake() -> tuple[asyncio.StreamReader, asyncio.StreamWriter, Welcome]:
        reader, writer = await asyncio.open_unix_connection(socket_path)
        try:
            writer.write(hello)
            await writer.drain()
            frame = await _read_frame(reader, max_frame)
            if frame is None:
                raise Closed("capbridge hung up during the handshake")
            m = decode(frame)
            if isinstance(m, FatalMsg):
                raise Fatal(m.code, m.message)
            if not isinstance(m, Welcome):
                raise CapwireError(f"capwire: capbridge answered hello with a {type(m).__name__} frame")
            if m.v != VERSION:
                raise CapwireError(f"capwire: capbridge answered with wire version {m.v}, want {VERSION}")
            return reader, writer, m
        except BaseException:
            writer.close()
            raise

    try:
        reader, writer, welcome = await asyncio.wait_for(handshake(), handshake_timeout)
    except asyncio.TimeoutError:
        raise CapwireError(f"capwire: dial {socket_path}: no welcome within {handshake_timeout} s") from None
    except OSError as e:
        raise CapwireError(f"capwire: dial {socket_path}: {e}") from e
    return Client(reader, writer, welcome.servers, max_frame, max(1, max_in_flight), write_timeout)


def env() -> tuple[str, str]:
    """CAPBRIDGE_SOCKET and CAPBRIDGE_TOKEN; NoEnv when either is unset."""
    sock, tok = os.environ.get(ENV_SOCKET, ""), os.environ.get(ENV_TOKEN, "")
    if not sock or not tok:
        raise NoEnv()
    return sock, tok


async def from_env(*, max_frame: int = DEFAULT_MAX_FRAME, max_in_flight: int = 1024,
                   handshake_timeout: float = 10.0, write_timeout: float = 30.0) -> Client:
    """Dials CAPBRIDGE_SOCKET with CAPBRIDGE_TOKEN (dial's bounds apply); NoEnv
    when either is unset."""
    sock, tok = env()
    return await dial(sock, tok, max_frame=max_frame, max_in_flight=max_in_flight,
                      handshake_timeout=handshake_timeout, write_timeout=write_timeout)


# Per event loop, since a Client belongs to the loop that dialed it; weak,
# so a finished loop takes its client with it.
_shared: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Client] = weakref.WeakKeyDictionary()
_shared_lock: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = weakref.WeakKeyDictionary()


async def shared() -> Client:
    """The client of the running event loop dialed from the environment on
    first use; if its connection has broken, the next call dials again.
    Generated façades call this; programs need not."""
    loop = asyncio.get_running_loop()
    lock = _shared_lock.setdefault(loop, asyncio.Lock())
    async with lock:
        c = _shared.get(loop)
        if c is not None and not c.closed:
            return c
        c = await from_env()
        _shared[loop] = c
        return c


async def describe(server: str, *tools: str) -> str:
    """Client.describe on the shared client."""
    return await (await shared()).describe(server, *tools)


async def search(query: str, limit: int = 0) -> list[dict[str, Any]]:
    """Client.search on the shared client."""
    return await (await shared()).search(query, limit)


async def read_resource(server: str, uri: str) -> Result:
    """Client.read_resource on the shared client."""
    return await (await shared()).read_resource(server, uri)


async def start(server: str, tool: str, args: object = None) -> str:
    """Client.start on the shared client."""
    return await (await shared()).start(server, tool, args)


async def collect(handle: str, *, timeout: Optional[float] = None) -> Result:
    """Client.collect on the shared client."""
    return await (await shared()).collect(handle, timeout=timeout)


async def drop(handle: str) -> None:
    """Client.drop on the shared client."""
    await (await shared()).drop(handle)
