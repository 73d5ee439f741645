import asyncio

import capwire
import memory


def check(r: capwire.Result) -> capwire.Result:
    if r.is_error:
        raise RuntimeError(r.text())
    return r


async def main() -> None:
    check(await memory.create_entities(entities=[
        {"name": "Ada", "entityType": "person", "observations": ["wrote the first program"]},
        {"name": "Engine", "entityType": "machine", "observations": ["analytical"]},
    ]))
    check(await memory.create_relations(relations=[{"from": "Ada", "to": "Engine", "relationType": "designed"}]))
    graph = memory.decode_read_graph(check(await memory.read_graph()))
    for e in sorted(graph["entities"], key=lambda e: e["name"]):
        print(f"{e['name']} ({e['entityType']})")
    for rel in graph["relations"]:
        print(f"{rel['from']} -{rel['relationType']}-> {rel['to']}")
    await (await capwire.shared()).close()


asyncio.run(main())
