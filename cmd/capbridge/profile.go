package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
)

// startProfiles starts what serve's --cpu-profile and --alloc-profile ask
// for (either path may be ""), creating both files first so that a path
// that cannot be written fails serve before anything runs. The function
// it returns stops the CPU profile and writes the allocation profile;
// serve calls it once, on its way out, and it reports failures to w.
//
// They are for measuring capbridge (the benchmark harness passes them):
// off, they cost nothing; on, the CPU profile samples 100 times a second
// and the allocation profile is the runtime's own sampling (one
// allocation in about 512 KiB), which is always on.
func startProfiles(cpuPath, allocPath string) (stop func(w io.Writer), err error) {
	var cpu, alloc *os.File
	closeAll := func() {
		for _, f := range []*os.File{cpu, alloc} {
			if f != nil {
				f.Close()
			}
		}
	}
	if cpuPath != "" {
		if cpu, err = os.OpenFile(cpuPath, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600); err != nil {
			return nil, fmt.Errorf("capbridge serve: --cpu-profile: %w", err)
		}
	}
	if allocPath != "" {
		if alloc, err = os.OpenFile(allocPath, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600); err != nil {
			closeAll()
			return nil, fmt.Errorf("capbridge serve: --alloc-profile: %w", err)
		}
	}
	if cpu != nil {
		if err := pprof.StartCPUProfile(cpu); err != nil {
			closeAll()
			return nil, fmt.Errorf("capbridge serve: --cpu-profile: %w", err)
		}
	}
	return func(w io.Writer) {
		var errs []error
		if cpu != nil {
			pprof.StopCPUProfile()
			errs = append(errs, cpu.Close())
		}
		if alloc != nil {
			// The profile counts what the last completed collection
			// saw: one now takes in everything allocated since.
			runtime.GC()
			errs = append(errs, pprof.Lookup("allocs").WriteTo(alloc, 0), alloc.Close())
		}
		if err := errors.Join(errs...); err != nil {
			fmt.Fprintln(w, "capbridge serve: writing a profile:", err)
		}
	}, nil
}
