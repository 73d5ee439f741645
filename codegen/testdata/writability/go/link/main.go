package main

import (
	"context"
	"fmt"
	"log"
	"strings"

	"github.com/capbridge/capbridge/capwire"

	"writability/everything"
)

func main() {
	ctx := context.Background()
	r, err := everything.GetResourceLinks(ctx, everything.GetResourceLinksArgs{Count: capwire.Ptr[float64](2)})
	if err != nil {
		log.Fatal(err)
	}
	if r.IsError {
		log.Fatal(r.Text())
	}
	for _, b := range r.Content {
		if b.Kind != "resource_link" {
			continue
		}
		fmt.Println(b.URI, b.Name)
		res, err := capwire.ReadResource(ctx, "everything", b.URI)
		if err != nil {
			log.Fatal(err)
		}
		for _, c := range res.Content {
			if c.Kind == "resource" {
				text := c.Text
				if text == "" && c.Data != nil {
					text = string(c.Data)
				}
				first, _, _ := strings.Cut(text, "\n")
				fmt.Println(first)
				return
			}
		}
		log.Fatal("the resource holds no contents")
	}
	log.Fatal("no resource link in the result")
}
