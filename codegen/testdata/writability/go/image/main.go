package main

import (
	"bytes"
	"context"
	"fmt"
	"log"

	"writability/everything"
)

func main() {
	r, err := everything.GetTinyImage(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	if r.IsError {
		log.Fatal(r.Text())
	}
	for _, b := range r.Content {
		if b.Kind != "image" {
			continue
		}
		if b.Data == nil {
			log.Fatalf("image of %d bytes not carried", b.Size)
		}
		fmt.Println(b.MIME, len(b.Data), bytes.HasPrefix(b.Data, []byte("\x89PNG")))
		return
	}
	log.Fatal("no image in the result")
}
