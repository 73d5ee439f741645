package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// A selection is the clients and cells one invocation measures, each in
// its nominal order (the order of clients and cells), whatever order the
// flags named them in.
type selection struct {
	clients []client
	cells   []cell
}

func (s selection) has(name string) bool {
	return slices.ContainsFunc(s.clients, func(cl client) bool { return cl.name == name })
}

// flagName is how -cells names c: "64B/1", "16KiB/32".
func (c cell) flagName() string {
	size := strconv.Itoa(c.Bytes) + "B"
	if c.Bytes >= 1024 && c.Bytes%1024 == 0 {
		size = strconv.Itoa(c.Bytes/1024) + "KiB"
	}
	return size + "/" + strconv.Itoa(c.InFlight)
}

func clientNames(cls []client) []string {
	names := make([]string, len(cls))
	for i, cl := range cls {
		names[i] = cl.name
	}
	return names
}

func cellNames(cs []cell) []string {
	names := make([]string, len(cs))
	for i, c := range cs {
		names[i] = c.flagName()
	}
	return names
}

// parseClients reads -clients: a comma-separated list of client names.
func parseClients(list string) ([]client, error) {
	pick, err := parseList(list, clientNames(clients), "client")
	if err != nil {
		return nil, err
	}
	var out []client
	for i, cl := range clients {
		if pick[i] {
			out = append(out, cl)
		}
	}
	return out, nil
}

// parseCells reads -cells: a comma-separated list of cells as flagName
// writes them.
func parseCells(list string) ([]cell, error) {
	pick, err := parseList(list, cellNames(cells), "cell")
	if err != nil {
		return nil, err
	}
	var out []cell
	for i, c := range cells {
		if pick[i] {
			out = append(out, c)
		}
	}
	return out, nil
}

// parseList marks which of valid the comma-separated list names. Every
// name must be valid and the list must name at least one; a name given
// twice counts once.
func parseList(list string, valid []string, kind string) ([]bool, error) {
	pick := make([]bool, len(valid))
	n := 0
	for name := range strings.SplitSeq(list, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		i := slices.Index(valid, name)
		if i < 0 {
			return nil, fmt.Errorf("unknown %s %q; valid: %s", kind, name, strings.Join(valid, ","))
		}
		if !pick[i] {
			pick[i] = true
			n++
		}
	}
	if n == 0 {
		return nil, fmt.Errorf("no %s named; valid: %s", kind, strings.Join(valid, ","))
	}
	return pick, nil
}
