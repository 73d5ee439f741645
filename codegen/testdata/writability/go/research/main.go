package main

import (
	"context"
	"fmt"
	"log"
	"strings"

	"writability/everything"
)

func main() {
	r, err := everything.SimulateResearchQuery(context.Background(), everything.SimulateResearchQueryArgs{Topic: "writability"})
	if err != nil {
		log.Fatal(err)
	}
	if r.IsError {
		log.Fatal(r.Text())
	}
	first, _, _ := strings.Cut(r.Text(), "\n")
	fmt.Println(first)
}
