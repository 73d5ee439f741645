"""The end-to-end program the Go test internal/testkit/clienttest runs against a
real bridge: it dials with nothing but CAPBRIDGE_SOCKET and
CAPBRIDGE_TOKEN and prints one "what: value" line per check. Before the
cancellation it prints "cancel: waiting" and reads a line from stdin,
which the test sends once the bridge reports the call in flight at the
server."""

from __future__ import annotations

import asyncio
import sys

import capwire


def say(s: str) -> None:
    print(s, flush=True)


async def main() -> None:
    async with await capwire.from_env() as c:
        say("servers: " + ",".join(sorted(c.servers)))

        # Three calls at once on the one connection.
        echo, content, add = await asyncio.gather(
            c.call("t", "echo", {"text": "hello e2e"}),
            c.call("t", "content"),
            c.call("t", "add", {"a": 40, "b": 2}),
        )
        say(f"echo: {echo.text()} is_error={str(echo.is_error).lower()}")
        say("content: " + ",".join("text" if b.type == "text" else f"other:{b.kind}" if b.type == "other" else b.type
                                  for b in content.content))
        say("structured: kinds=" + ",".join(content.structured["kinds"]))
        say(f"add: {add.text()} sum={add.structured['sum']}")

        fail = await c.call("t", "fail", {"message": "as asked"})
        say(f"fail: {fail.text()} is_error={str(fail.is_error).lower()}")

        try:
            await c.call("t", "content", {"blob": {"bytes": b"\x01\x02\x03"}})
            say("denied: none")
        except capwire.Denied as e:
            say(f"denied: {e.code} at {e.path}")

        # Every kind of block: an image's bytes, a link followed to its resource.
        image = next(b for b in content.content if b.kind == "image")
        say(f"image: {image.mime} {len(image.data or b'')} bytes")
        link = next(b for b in content.content if b.kind == "resource_link")
        linked = await c.read_resource("t", link.uri or "")
        say(f"link: {link.uri} read: {linked.content[0].text}")

        # An argument that breaks the tool's schema is refused before the server.
        try:
            await c.call("t", "add", {"a": "forty", "b": 2})
            say("schema: none")
        except capwire.Denied as e:
            say(f"schema: {e.code} at {e.path}")
        # describe and search, from inside the grant.
        say("describe: " + ("echo" if "echo(" in await c.describe("t", "echo") else "?"))
        found = await c.search("echo", 1)
        say("search: " + (found[0]["tool"] if found else "none"))
        # A call started in the background, collected later.
        handle = await c.start("t", "echo", {"text": "later"})
        say("collected: " + (await c.collect(handle)).text())

        hang = asyncio.ensure_future(c.call("t", "hang", {}))
        say("cancel: waiting")
        loop = asyncio.get_running_loop()
        while (await loop.run_in_executor(None, sys.stdin.readline)).strip() != "go":
            pass
        hang.cancel()
        try:
            await hang
            say("cancel: answered")
        except asyncio.CancelledError:
            say("cancel: gave up")
        # The server saw the call cancelled: capbridge relayed the cancel.
        while True:
            r = await c.call("t", "cancellations")
            seen = [x["tool"] for x in r.structured["cancelled"]]
            if seen:
                say("cancelled at the server: " + ",".join(seen))
                break
            await asyncio.sleep(0.02)

        try:
            await c.call("t", "slow", {"ms": 0})
            say("not_granted: none")
        except capwire.Denied as e:
            say(f"not_granted: {e.code}")


asyncio.run(main())
