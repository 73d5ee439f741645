package main

import (
	"context"
	"fmt"
	"log"
	"sort"

	"writability/memory"
)

func main() {
	ctx := context.Background()
	r, err := memory.CreateEntities(ctx, memory.CreateEntitiesArgs{Entities: []memory.CreateEntitiesEntity{
		{Name: "Ada", EntityType: "person", Observations: []string{"wrote the first program"}},
		{Name: "Engine", EntityType: "machine", Observations: []string{"analytical"}},
	}})
	if err != nil {
		log.Fatal(err)
	}
	if r.IsError {
		log.Fatal(r.Text())
	}
	r, err = memory.CreateRelations(ctx, memory.CreateRelationsArgs{Relations: []memory.CreateRelationsRelation{
		{From: "Ada", To: "Engine", RelationType: "designed"},
	}})
	if err != nil {
		log.Fatal(err)
	}
	if r.IsError {
		log.Fatal(r.Text())
	}
	r, err = memory.ReadGraph(ctx)
	if err != nil {
		log.Fatal(err)
	}
	if r.IsError {
		log.Fatal(r.Text())
	}
	g, err := memory.DecodeReadGraph(r)
	if err != nil {
		log.Fatal(err)
	}
	sort.Slice(g.Entities, func(i, j int) bool { return g.Entities[i].Name < g.Entities[j].Name })
	for _, e := range g.Entities {
		fmt.Printf("%s (%s)\n", e.Name, e.EntityType)
	}
	for _, rel := range g.Relations {
		fmt.Printf("%s -%s-> %s\n", rel.From, rel.RelationType, rel.To)
	}
}
