"""The façade end-to-end program the Go test internal/testkit/clienttest runs
against a real bridge: it calls the tools of server-everything and of
mcptest ("t") through the Python façades fetched from the control plane,
dialing with nothing but CAPBRIDGE_SOCKET and CAPBRIDGE_TOKEN, and prints
one "what: value" line per check. Before the cancellation it prints
"cancel: waiting" and reads a line from stdin, which the test sends once
the bridge reports the call in flight at the server."""

from __future__ import annotations

import asyncio
import sys

import capwire
import everything
import t


def say(s: str) -> None:
    print(s, flush=True)


def blocks(r: capwire.Result) -> str:
    return ",".join("text" if b.type == "text" else f"other:{b.kind}" if b.type == "other" else b.type
                    for b in r.content)


async def main() -> None:
    c = await capwire.shared()
    say("servers: " + ",".join(sorted(c.servers)))

    echo = await everything.echo(message="hello façade")
    say(f"echo: {echo.text()} is_error={str(echo.is_error).lower()}")
    say("image: " + blocks(await everything.get_tiny_image()))
    w = everything.decode_get_structured_content(await everything.get_structured_content(location="Chicago"))
    say(f"weather: temperature={w['temperature']:.1f} humidity={w['humidity']:.1f} conditions={w['conditions']}")
    # A tool that runs as an MCP task: the call waits for the task's result.
    report = await everything.simulate_research_query(topic="façades")
    say("task: " + report.text().split("\n")[0])

    total: int = t.decode_add(await t.add(a=40, b=2))["sum"]
    say(f"add: sum={total}")

    fail = await t.fail(message="as asked")
    say(f"fail: {fail.text()} is_error={str(fail.is_error).lower()}")

    try:
        # blob is an open object, so its values are Any: bytes type-check,
        # and capbridge refuses them as arguments.
        await t.content(blob={"bytes": b"\x01\x02\x03"})
        say("denied: none")
    except capwire.Denied as e:
        say(f"denied: {e.code} at {e.path}")

    try:
        kinds: list[int] = t.decode_content(await t.content())["kinds"]
        say(f"mismatch: none {kinds}")
    except capwire.DecodeError as e:
        say(f"mismatch: at {e.path} want {e.want} got {e.got}")

    # Cancellations the server saw before this program's: another may have run.
    before = len(t.decode_cancellations(await t.cancellations())["cancelled"])
    hang = asyncio.ensure_future(t.hang())
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
    # The server saw the call cancelled: capbridge relayed the cancel, which
    # reaches the server after the call gave up here, so ask until it has.
    while True:
        seen = [x["tool"] for x in t.decode_cancellations(await t.cancellations())["cancelled"][before:]]
        if seen:
            say("cancelled at the server: " + ",".join(seen))
            break
        await asyncio.sleep(0.02)

    try:
        await t.slow(ms=0)
        say("not_granted: none")
    except capwire.Denied as e:
        say(f"not_granted: {e.code}")
    await c.close()


asyncio.run(main())
