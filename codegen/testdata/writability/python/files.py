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
    path = dirs[0] + "/hello.txt"
    text(await filesystem.write_file(path=path, content="hello, capbridge"))
    print(text(await filesystem.read_text_file(path=path)))
    for line in text(await filesystem.list_directory(path=dirs[0])).split("\n"):
        if "hello.txt" in line:
            print(line)
    await (await capwire.shared()).close()


asyncio.run(main())
