import asyncio

import capwire
import everything


async def main() -> None:
    r = await everything.get_structured_content(location="Chicago")
    if r.is_error:
        raise RuntimeError(r.text())
    w = everything.decode_get_structured_content(r)
    print(f"temperature={w['temperature']:.1f} humidity={w['humidity']:.1f}")
    await (await capwire.shared()).close()


asyncio.run(main())
