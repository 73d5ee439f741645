"""The clients against a scripted capbridge on a real Unix socket:
multiplexing, cancellation, deadlines, denials, and hostile frames that
must end in a typed error, never a hang."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
import threading
import unittest
from typing import Any, Awaitable, Callable, Iterator, Optional

import capwire
from capwire import Closed, Denied, Fatal, WireError, has_code
from capwire._msgpack import Writer, unpack

Msg = dict[str, Any]


def frame_of(p: bytes) -> bytes:
    return len(p).to_bytes(4, "big") + p


def pack(m: Any) -> bytes:
    w = Writer()
    w.value(m)
    return bytes(w.buf)


def text(id: Any, s: str) -> Msg:
    return {"t": "result", "id": id, "is_error": False, "content": [{"type": "text", "text": s}]}


class Peer:
    """One accepted connection of the scripted capbridge."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self.writer = writer
        self.got: list[Msg] = []
        self.arrived = asyncio.Condition()

    def send(self, m: Msg) -> None:
        self.writer.write(frame_of(pack(m)))

    def raw(self, b: bytes) -> None:
        self.writer.write(b)

    def raw_and_close(self, b: bytes) -> None:
        self.writer.write(b)
        self.writer.close()

    async def frames(self, n: int) -> None:
        async with self.arrived:
            await self.arrived.wait_for(lambda: len(self.got) >= n)


class Capbridge:
    """Welcomes any hello with welcome, then gives every frame to on_frame."""

    def __init__(self, path: str, welcome: Msg, on_frame: Callable[[Peer, Msg], None]) -> None:
        self.path = path
        self.welcome = welcome
        self.on_frame = on_frame
        self.peer: asyncio.Future[Peer] = asyncio.get_running_loop().create_future()
        self.server: Optional[asyncio.AbstractServer] = None
        self.writers: list[asyncio.StreamWriter] = []

    async def start(self) -> Capbridge:
        self.server = await asyncio.start_unix_server(self.serve, self.path)
        return self

    async def serve(self, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        p = Peer(w)
        self.writers.append(w)
        try:
            while True:
                n = int.from_bytes(await r.readexactly(4), "big")
                m = unpack(await r.readexactly(n))
                if m["t"] == "hello":
                    p.send(self.welcome)
                    if not self.peer.done():
                        self.peer.set_result(p)
                    continue
                async with p.arrived:
                    p.got.append(m)
                    p.arrived.notify_all()
                self.on_frame(p, m)
        except (asyncio.IncompleteReadError, ConnectionError):
            w.close()

    async def stop(self) -> None:
        assert self.server is not None
        self.server.close()
        for w in self.writers:
            w.close()
        await self.server.wait_closed()


def bounded(coro: Callable[..., Awaitable[None]]) -> Callable[..., None]:
    """Runs an async test on a fresh loop, bounded so a hang fails instead."""
    async def with_cleanup(self: ClientTest) -> None:
        try:
            await coro(self)
        finally:
            for cb in self.servers:
                await cb.stop()

    def run(self: ClientTest) -> None:
        asyncio.run(asyncio.wait_for(with_cleanup(self), 30))
    return run


class ClientTest(unittest.TestCase):
    def setUp(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="cw")
        self.n = 0
        self.servers: list[Capbridge] = []

    def tearDown(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    async def capbridge(self, on_frame: Callable[[Peer, Msg], None] = lambda p, m: None,
                        welcome: Optional[Msg] = None) -> Capbridge:
        self.n += 1
        path = os.path.join(self.dir, f"s{self.n}.sock")
        cb = await Capbridge(path, welcome or {"t": "welcome", "v": 1, "servers": ["t"]}, on_frame).start()
        self.servers.append(cb)
        return cb

    @bounded
    async def test_dial(self) -> None:
        cb = await self.capbridge(welcome={"t": "welcome", "v": 1, "servers": ["a", "b"]})
        async with await capwire.dial(cb.path, "tok") as c:
            self.assertEqual(c.servers, ("a", "b"))
        refused = await self.capbridge(welcome={"t": "fatal", "code": "bad_token", "message": "unknown"})
        with self.assertRaises(Fatal) as cm:
            await capwire.dial(refused.path, "tok")
        self.assertTrue(has_code(cm.exception, capwire.BAD_TOKEN))
        newer = await self.capbridge(welcome={"t": "welcome", "v": 2, "servers": []})
        with self.assertRaisesRegex(capwire.CapwireError, "wire version 2, want 1"):
            await capwire.dial(newer.path, "tok")
        mute = os.path.join(self.dir, "mute.sock")
        accepted: list[asyncio.StreamWriter] = []
        server = await asyncio.start_unix_server(lambda r, w: accepted.append(w), mute)
        with self.assertRaisesRegex(capwire.CapwireError, "no welcome within 0.05 s"):
            await capwire.dial(mute, "tok", handshake_timeout=0.05)
        server.close()
        for w in accepted:
            w.close()
        await server.wait_closed()

    @bounded
    async def test_multiplexed_in_any_order(self) -> None:
        cb = await self.capbridge()
        c = await capwire.dial(cb.path, "tok")
        calls = [asyncio.ensure_future(c.call("t", "echo", {"i": i})) for i in range(5)]
        p = await cb.peer
        await p.frames(5)
        self.assertEqual([(m["t"], m["cap"], m["op"], m["args"]) for m in p.got],
                         [("call", "mcp.t", "echo", {"i": i}) for i in range(5)])
        for m in reversed(p.got):
            p.send(text(m["id"], f"r{m['args']['i']}"))
        self.assertEqual([r.text() for r in await asyncio.gather(*calls)], [f"r{i}" for i in range(5)])
        await c.close()

    @bounded
    async def test_result_fields_and_denials(self) -> None:
        def answer(p: Peer, m: Msg) -> None:
            if m.get("op") == "bad":
                p.send({"t": "denied", "id": m["id"], "code": "bad_arguments", "message": "no", "path": "/blob/bytes"})
            elif m.get("op") == "boom":
                p.send({"t": "denied", "id": m["id"], "code": "server_error", "message": "x", "rpc_code": -32603})
            else:
                p.send({"t": "result", "id": m["id"], "is_error": True,
                        "content": [{"type": "text", "text": "a"},
                                    {"type": "other", "kind": "image", "mime": "image/png", "data": b"\x89PNG",
                                     "size": 4, "later": 1},
                                    {"type": "text", "text": "b"},
                                    {"type": "other", "kind": "resource", "uri": "file:///a", "text": "A"},
                                    {"type": "other", "kind": "audio", "size": 9000000}],
                        "structured": {"n": 1}, "truncated": True})
        cb = await self.capbridge(answer)
        c = await capwire.dial(cb.path, "tok")
        r = await c.call("t", "x")
        self.assertTrue(r.is_error)
        self.assertEqual(r.text(), "a\nb")
        self.assertEqual(r.content[0], capwire.Block("text", kind="text", text="a"))
        self.assertEqual(r.content[1], capwire.Block("other", kind="image", mime="image/png", data=b"\x89PNG", size=4))
        self.assertEqual(r.content[3], capwire.Block("other", kind="resource", uri="file:///a", text="A"))
        self.assertEqual(r.content[4], capwire.Block("other", kind="audio", size=9000000))
        self.assertEqual(r.structured, {"n": 1})
        self.assertTrue(r.truncated)
        with self.assertRaises(Denied) as cm:
            await c.call("t", "bad")
        self.assertEqual((cm.exception.code, cm.exception.path, cm.exception.message), ("bad_arguments", "/blob/bytes", "no"))
        with self.assertRaises(Denied) as cm:
            await c.call("t", "boom")
        self.assertEqual(cm.exception.rpc_code, -32603)
        self.assertTrue(has_code(cm.exception, capwire.SERVER_ERROR))
        await c.close()

    @bounded
    async def test_quota_denial_and_traceparent(self) -> None:
        def answer(p: Peer, m: Msg) -> None:
            if m.get("op") == "rate":
                p.send({"t": "denied", "id": m["id"], "code": "quota_exceeded", "message": "slow down",
                        "quota": "t:rate", "retry_ms": 250})
            elif m.get("op") == "total":
                p.send({"t": "denied", "id": m["id"], "code": "quota_exceeded", "message": "spent", "quota": "calls"})
            else:
                p.send(text(m["id"], "ok"))
        cb = await self.capbridge(answer)
        c = await capwire.dial(cb.path, "tok")
        with self.assertRaises(Denied) as cm:
            await c.call("t", "rate")
        self.assertEqual((cm.exception.code, cm.exception.quota, cm.exception.retry_ms), ("quota_exceeded", "t:rate", 250))
        self.assertTrue(has_code(cm.exception, capwire.QUOTA_EXCEEDED))
        with self.assertRaises(Denied) as cm:
            await c.call("t", "total")
        self.assertEqual((cm.exception.quota, cm.exception.retry_ms), ("calls", None))
        tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        await c.call("t", "echo", traceparent=tp)
        await c.call("t", "echo")
        p = await cb.peer
        await p.frames(4)
        self.assertEqual(p.got[2]["traceparent"], tp)
        self.assertNotIn("traceparent", p.got[3])
        await c.close()

    @bounded
    async def test_task_cancel_sends_cancel_and_drops_the_late_reply(self) -> None:
        cb = await self.capbridge()
        c = await capwire.dial(cb.path, "tok")
        slow = asyncio.ensure_future(c.call("t", "hang"))
        other = asyncio.ensure_future(c.call("t", "echo"))
        p = await cb.peer
        await p.frames(2)
        slow.cancel()
        with self.assertRaises(asyncio.CancelledError):
            await slow
        await p.frames(3)
        hang, echo, cancel = p.got
        self.assertEqual(cancel, {"t": "cancel", "id": hang["id"]})
        p.send({"t": "denied", "id": hang["id"], "code": "cancelled"})  # the late reply: dropped
        p.send(text(echo["id"], "still fine"))
        self.assertEqual((await other).text(), "still fine")
        await c.close()

    @bounded
    async def test_task_cancel_at_every_early_step_is_honoured(self) -> None:
        # A cancel that lands while the call is still being written (each
        # loop turn of its first steps) must end the task, never be lost
        # so that the call waits for an answer nobody will send.
        cb = await self.capbridge()
        c = await capwire.dial(cb.path, "tok")
        for turns in range(8):
            call = asyncio.ensure_future(c.call("t", "hang"))
            for _ in range(turns):
                await asyncio.sleep(0)
            call.cancel()
            with self.assertRaises(asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(call), 10)
        await c.close()

    @bounded
    async def test_timeout_is_sent_and_cancels_here(self) -> None:
        cb = await self.capbridge()
        c = await capwire.dial(cb.path, "tok")
        with self.assertRaisesRegex(TimeoutError, "timed out after 30 ms"):
            await c.call("t", "hang", timeout=0.03)
        p = await cb.peer
        await p.frames(2)
        self.assertEqual(p.got[0]["timeout_ms"], 30)
        self.assertEqual(p.got[1], {"t": "cancel", "id": p.got[0]["id"]})
        await c.close()

    @bounded
    async def test_max_in_flight(self) -> None:
        cb = await self.capbridge()
        c = await capwire.dial(cb.path, "tok", max_in_flight=2)
        calls = [asyncio.ensure_future(c.call("t", "echo", {"i": i})) for i in range(3)]
        p = await cb.peer
        await p.frames(2)
        for _ in range(10):
            await asyncio.sleep(0)
        self.assertEqual(len(p.got), 2)
        p.send(text(p.got[0]["id"], "one"))
        await p.frames(3)
        p.send(text(p.got[1]["id"], "two"))
        p.send(text(p.got[2]["id"], "three"))
        self.assertEqual([r.text() for r in await asyncio.gather(*calls)], ["one", "two", "three"])
        await c.close()

    async def under_attack(self, hostile: Callable[[Peer], None]) -> tuple[capwire.Client, list[BaseException]]:
        cb = await self.capbridge()
        c = await capwire.dial(cb.path, "tok", max_frame=1024)
        calls = [asyncio.ensure_future(c.call("t", "a")), asyncio.ensure_future(c.call("t", "b"))]
        p = await cb.peer
        await p.frames(2)
        hostile(p)
        out = await asyncio.gather(*calls, return_exceptions=True)
        return c, [e for e in out if isinstance(e, BaseException)]

    @bounded
    async def test_hostile_frames(self) -> None:
        deep = b"\x82\xa1t\xa6result\xa1x" + b"\x91" * 200 + b"\x00"
        cases: list[tuple[str, Callable[[Peer], None], str]] = [
            ("oversized length", lambda p: p.raw(b"\x00\x00\x04\x01"), "frame_too_large"),
            ("zero length", lambda p: p.raw(b"\x00\x00\x00\x00"), "bad_frame"),
            ("not MessagePack", lambda p: p.raw(frame_of(b"\xc1")), "bad_frame"),
            ("trailing bytes", lambda p: p.raw(frame_of(b"\x80\x80")), "bad_frame"),
            ("hang-up inside a frame", lambda p: p.raw_and_close(b"\x00\x00\x00\x09\x81"), "bad_frame"),
            ("over-deep frame without id", lambda p: p.raw(frame_of(deep)), "bad_request"),
            ("fatal frame", lambda p: p.send({"t": "fatal", "code": "bad_frame", "message": "yours"}), "bad_frame"),
            ("id-less denial", lambda p: p.send({"t": "denied", "code": "bad_request"}), "bad_request"),
        ]
        for name, hostile, code in cases:
            with self.subTest(name):
                c, errs = await self.under_attack(hostile)
                self.assertEqual(len(errs), 2)
                for e in errs:
                    self.assertIsInstance(e, Closed)
                    self.assertTrue(has_code(e, code), repr(e.__cause__))
                self.assertTrue(c.closed)
                with self.assertRaises(Closed):
                    await c.call("t", "after")
                await c.close()

    @bounded
    async def test_malformed_reply_with_id_fails_that_call_only(self) -> None:
        cb = await self.capbridge()
        c = await capwire.dial(cb.path, "tok")
        a = asyncio.ensure_future(c.call("t", "a"))
        b = asyncio.ensure_future(c.call("t", "b"))
        p = await cb.peer
        await p.frames(2)
        p.send({"t": "gossip", "id": p.got[0]["id"]})  # a type from a newer capbridge: ignored
        p.send({"t": "result", "id": p.got[0]["id"], "is_error": "maybe", "content": []})
        p.send(text(p.got[1]["id"], "fine"))
        with self.assertRaisesRegex(capwire.CapwireError, "malformed reply") as cm:
            await a
        self.assertIsInstance(cm.exception.__cause__, WireError)
        self.assertEqual((await b).text(), "fine")
        self.assertFalse(c.closed)
        await c.close()

    @contextlib.contextmanager
    def threaded_capbridge(self, answer: Callable[[Peer, Msg], None]) -> Iterator[str]:
        """A scripted capbridge on its own event loop in another thread, for
        the blocking client, which runs a loop of its own; yields its socket
        path and stops it on exit."""
        ready = threading.Event()
        state: dict[str, Any] = {}

        async def serve() -> None:
            cb = await self.capbridge(answer)
            state["path"] = cb.path
            state["stop"] = asyncio.get_running_loop().create_future()
            state["loop"] = asyncio.get_running_loop()
            ready.set()
            await state["stop"]
            await cb.stop()
            await asyncio.sleep(0)

        t = threading.Thread(target=lambda: asyncio.run(asyncio.wait_for(serve(), 60)))
        t.start()
        try:
            self.assertTrue(ready.wait(30))
            yield state["path"]
        finally:
            if "loop" in state:
                state["loop"].call_soon_threadsafe(state["stop"].set_result, None)
            t.join(30)

    def test_blocking_client(self) -> None:
        def answer(p: Peer, m: Msg) -> None:
            if m.get("op") == "echo":
                p.send(text(m["id"], "sync " + m["args"]["s"]))
        with self.threaded_capbridge(answer) as path:
            with capwire.BlockingClient.dial(path, "tok") as c:
                self.assertEqual(c.servers, ("t",))
                results: list[str] = []
                threads = [threading.Thread(target=lambda i=i: results.append(c.call("t", "echo", {"s": str(i)}).text()))
                           for i in range(4)]
                for th in threads:
                    th.start()
                for th in threads:
                    th.join(30)
                self.assertEqual(sorted(results), [f"sync {i}" for i in range(4)])
                with self.assertRaises(TimeoutError):
                    c.call("t", "hang", timeout=0.03)
            self.assertTrue(c.closed)

    def test_blocking_capbridge_capability(self) -> None:
        got: list[tuple[str, str, Any]] = []

        def answer(p: Peer, m: Msg) -> None:
            if m["t"] == "cancel":
                got.append(("cancel", "", None))
                return
            got.append((m["cap"], m["op"], m["args"]))
            op = m["op"]
            if op == "describe":
                p.send(text(m["id"], "async def echo()"))
            elif op == "search":
                p.send({"t": "result", "id": m["id"], "is_error": False, "content": [],
                        "structured": {"matches": [{"server": "t", "tool": "echo", "score": 5}]}})
            elif op == "read_resource":
                p.send({"t": "result", "id": m["id"], "is_error": False,
                        "content": [{"type": "other", "kind": "resource", "uri": m["args"]["uri"], "text": "R"}]})
            elif op == "start":
                p.send(text(m["id"], "h1"))
            elif op == "collect" and m["args"]["handle"] == "h1":
                p.send(text(m["id"], "done"))
            elif op == "drop":
                p.send({"t": "result", "id": m["id"], "is_error": False, "content": []})
            # Any other collect is never answered: the caller's timeout ends it.

        with self.threaded_capbridge(answer) as path:
            with capwire.BlockingClient.dial(path, "tok") as c:
                self.assertEqual(c.describe("t", "echo"), "async def echo()")
                self.assertEqual(c.search("echo back", 3), [{"server": "t", "tool": "echo", "score": 5}])
                r = c.read_resource("t", "file:///a")
                self.assertEqual((r.content[0].kind, r.content[0].uri, r.content[0].text), ("resource", "file:///a", "R"))
                h = c.start("t", "echo", {"s": "x"})
                self.assertEqual(h, "h1")
                self.assertEqual(c.collect(h).text(), "done")
                with self.assertRaises(TimeoutError):
                    c.collect("h2", timeout=0.03)
                c.drop("h2")
        cap = capwire.CAP_BRIDGE
        self.assertEqual(got, [
            (cap, "describe", {"server": "t", "tools": ["echo"], "lang": "python"}),
            (cap, "search", {"query": "echo back", "limit": 3, "lang": "python"}),
            (cap, "read_resource", {"server": "t", "uri": "file:///a"}),
            (cap, "start", {"server": "t", "tool": "echo", "args": {"s": "x"}}),
            (cap, "collect", {"handle": "h1"}),
            (cap, "collect", {"handle": "h2"}),
            ("cancel", "", None),
            (cap, "drop", {"handle": "h2"}),
        ])

if __name__ == "__main__":
    unittest.main()
