package main

import (
	"context"
	"fmt"
	"log"
	"path/filepath"
	"strings"

	"writability/filesystem"
)

func main() {
	ctx := context.Background()
	r, err := filesystem.ListAllowedDirectories(ctx)
	if err != nil {
		log.Fatal(err)
	}
	if r.IsError {
		log.Fatal(r.Text())
	}
	dir := ""
	for _, line := range strings.Split(r.Text(), "\n") {
		if line = strings.TrimSpace(line); strings.HasPrefix(line, "/") {
			dir = line
			break
		}
	}
	if dir == "" {
		log.Fatalf("no allowed directory in %q", r.Text())
	}
	path := filepath.Join(dir, "todo.txt")
	r, err = filesystem.WriteFile(ctx, filesystem.WriteFileArgs{Path: path, Content: "a\nb\nc"})
	if err != nil {
		log.Fatal(err)
	}
	if r.IsError {
		log.Fatal(r.Text())
	}
	r, err = filesystem.EditFile(ctx, filesystem.EditFileArgs{Path: path, Edits: []filesystem.EditFileEdit{{OldText: "b", NewText: "B"}}})
	if err != nil {
		log.Fatal(err)
	}
	if r.IsError {
		log.Fatal(r.Text())
	}
	r, err = filesystem.ReadTextFile(ctx, filesystem.ReadTextFileArgs{Path: path})
	if err != nil {
		log.Fatal(err)
	}
	if r.IsError {
		log.Fatal(r.Text())
	}
	fmt.Println(strings.Join(strings.Split(strings.TrimRight(r.Text(), "\n"), "\n"), ","))
}
