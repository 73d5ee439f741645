import asyncio

import capwire
import memory


async def main() -> None:
    r = await memory.search_nodes(query="analytical")
    if r.is_error:
        raise RuntimeError(r.text())
    for e in memory.decode_search_nodes(r)["entities"]:
        print(e["name"])
    await (await capwire.shared()).close()


asyncio.run(main())
