package main

import (
	"context"
	"fmt"
	"log"

	"writability/everything"
)

func main() {
	r, err := everything.GetStructuredContent(context.Background(), everything.GetStructuredContentArgs{Location: everything.GetStructuredContentLocationChicago})
	if err != nil {
		log.Fatal(err)
	}
	if r.IsError {
		log.Fatal(r.Text())
	}
	w, err := everything.DecodeGetStructuredContent(r)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("temperature=%.1f humidity=%.1f\n", w.Temperature, w.Humidity)
}
