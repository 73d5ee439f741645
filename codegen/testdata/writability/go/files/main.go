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
	path := filepath.Join(dir, "hello.txt")
	r, err = filesystem.WriteFile(ctx, filesystem.WriteFileArgs{Path: path, Content: "hello, capbridge"})
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
	fmt.Println(r.Text())
	r, err = filesystem.ListDirectory(ctx, filesystem.ListDirectoryArgs{Path: dir})
	if err != nil {
		log.Fatal(err)
	}
	if r.IsError {
		log.Fatal(r.Text())
	}
	for _, line := range strings.Split(r.Text(), "\n") {
		if strings.Contains(line, "hello.txt") {
			fmt.Println(line)
		}
	}
}
