import asyncio

import capwire
import everything


async def main() -> None:
    r = await everything.get_tiny_image()
    if r.is_error:
        raise RuntimeError(r.text())
    images = [b for b in r.content if b.kind == "image"]
    if not images:
        raise RuntimeError("no image in the result")
    img = images[0]
    if img.data is None:
        raise RuntimeError(f"image of {img.size} bytes not carried")
    print(img.mime, len(img.data), str(img.data.startswith(b"\x89PNG")).lower())
    await (await capwire.shared()).close()


asyncio.run(main())
