import asyncio

import capwire
import everything


async def main() -> None:
    r = await everything.get_resource_links(count=2)
    if r.is_error:
        raise RuntimeError(r.text())
    links = [b for b in r.content if b.kind == "resource_link"]
    if not links:
        raise RuntimeError("no resource link in the result")
    link = links[0]
    uri = link.uri
    if uri is None:
        raise RuntimeError("the link has no URI")
    print(uri, link.name)
    res = await capwire.read_resource("everything", uri)
    contents = [b for b in res.content if b.kind == "resource"]
    if not contents:
        raise RuntimeError("the resource holds no contents")
    c = contents[0]
    body = c.text if c.text is not None else (c.data or b"").decode()
    print(body.split("\n")[0])
    await (await capwire.shared()).close()


asyncio.run(main())
