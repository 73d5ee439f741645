"""The end-to-end program of the blocking client, which the Go test
internal/testkit/clienttest runs against a real bridge: with nothing but
CAPBRIDGE_SOCKET and CAPBRIDGE_TOKEN, and no asyncio of its own, it uses
every call of the capbridge capability and prints one "what: value" line
per check."""

from __future__ import annotations

import time

import capwire


def say(s: str) -> None:
    print(s, flush=True)


def main() -> None:
    with capwire.BlockingClient.from_env() as c:
        say("servers: " + ",".join(sorted(c.servers)))
        say("echo: " + c.call("t", "echo", {"text": "hello blocking"}).text())
        # describe and search, within the grant.
        say("describe: " + ("echo" if "def echo(" in c.describe("t", "echo") else "?"))
        found = c.search("echo", 1)
        say("search: " + (found[0]["tool"] if found else "none"))
        # A link followed to its resource.
        link = next(b for b in c.call("t", "content").content if b.kind == "resource_link")
        linked = c.read_resource("t", link.uri or "")
        say(f"link: {link.uri} read: {linked.content[0].text}")
        # A call started in the background, collected later.
        handle = c.start("t", "echo", {"text": "later"})
        say("collected: " + c.collect(handle).text())
        # A wait for a call that does not end gives up and leaves it
        # running; dropping it cancels it at the server.
        hang = c.start("t", "hang")
        try:
            c.collect(hang, timeout=0.05)
            say("collect: answered")
        except TimeoutError:
            say("collect: gave up")
        except capwire.Denied as e:
            say("collect: gave up" if capwire.has_code(e, capwire.TIMEOUT) else f"collect: {e.code}")
        c.drop(hang)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            seen = [x["tool"] for x in c.call("t", "cancellations").structured["cancelled"]]
            if seen:
                say("dropped at the server: " + ",".join(seen))
                break
            time.sleep(0.02)
        try:
            c.collect(hang)
            say("collect after drop: answered")
        except capwire.Denied as e:
            say(f"collect after drop: {e.code}")


main()
