import * as capwire from "@capbridge/capwire";
import * as memory from "./memory.js";

function check(r: capwire.Result): capwire.Result {
  if (r.isError) throw new Error(r.text());
  return r;
}

check(await memory.createEntities({
  entities: [
    { name: "Ada", entityType: "person", observations: ["wrote the first program"] },
    { name: "Engine", entityType: "machine", observations: ["analytical"] },
  ],
}));
check(await memory.createRelations({ relations: [{ from: "Ada", to: "Engine", relationType: "designed" }] }));
const graph = memory.decodeReadGraph(check(await memory.readGraph()));
for (const e of [...graph.entities].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))) {
  console.log(`${e.name} (${e.entityType})`);
}
for (const rel of graph.relations) {
  console.log(`${rel.from} -${rel.relationType}-> ${rel.to}`);
}
(await capwire.shared()).close();
