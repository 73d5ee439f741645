import asyncio

import capwire
import everything


async def main() -> None:
    r = await everything.get_sum(a=19.5, b=22.5)
    if r.is_error:
        raise RuntimeError(r.text())
    print(r.text())
    await (await capwire.shared()).close()


asyncio.run(main())
