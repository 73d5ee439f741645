package main

import (
	"context"
	"fmt"
	"log"

	"writability/everything"
)

func main() {
	r, err := everything.GetSum(context.Background(), everything.GetSumArgs{A: 19.5, B: 22.5})
	if err != nil {
		log.Fatal(err)
	}
	if r.IsError {
		log.Fatal(r.Text())
	}
	fmt.Println(r.Text())
}
