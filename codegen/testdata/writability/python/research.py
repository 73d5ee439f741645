import asyncio

import capwire
import everything


async def main() -> None:
    r = await everything.simulate_research_query(topic="writability")
    if r.is_error:
        raise RuntimeError(r.text())
    print(r.text().split("\n")[0])
    await (await capwire.shared()).close()


asyncio.run(main())
