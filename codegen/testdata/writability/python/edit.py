import asyncio

import capwire
import filesystem


def text(r: capwire.Result) -> str:
    if r.is_error:
        raise RuntimeError(r.text())
    return r.text()


async def main() -> None:
    dirs = [line.strip() for line in text(await filesystem.list_allowed_directories()).split("\n") if line.strip().startswith("/")]
    if not dirs:
        raise RuntimeError("no allowed directory")
    path = dirs[0] + "/todo.txt"
    text(await filesystem.write_file(path=path, content="a\nb\nc"))
    text(await filesystem.edit_file(path=path, edits=[{"oldText": "b", "newText": "B"}]))
    print(",".join(text(await filesystem.read_text_file(path=path)).rstrip("\n").split("\n")))
    await (await capwire.shared()).close()


asyncio.run(main())
