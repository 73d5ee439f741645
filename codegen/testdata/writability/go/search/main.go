package main

import (
	"context"
	"fmt"
	"log"

	"writability/memory"
)

func main() {
	ctx := context.Background()
	r, err := memory.SearchNodes(ctx, memory.SearchNodesArgs{Query: "analytical"})
	if err != nil {
		log.Fatal(err)
	}
	if r.IsError {
		log.Fatal(r.Text())
	}
	out, err := memory.DecodeSearchNodes(r)
	if err != nil {
		log.Fatal(err)
	}
	for _, e := range out.Entities {
		fmt.Println(e.Name)
	}
}
