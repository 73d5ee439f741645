package main

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// children lists the processes whose parent is pid.
func children(pid int) ([]int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var kids []int
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			kids = append(kids, n)
		}
	}
	return kids, nil
}

// alive reports whether pid still exists (a zombie counts: nobody reaped it).
func alive(pid int) bool {
	return syscall.Kill(pid, 0) == nil
}
