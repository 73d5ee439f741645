package mcptest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strconv"
	"sync"
	"testing"

	"github.com/tidwall/gjson"
)

// The echo path is the peer of mcpwire's CallTool benchmarks, so its cost
// per call is measured against a baseline taken in the same run: the
// cheapest line-in/line-out peer over the same io.Pipes (it extracts the
// id and writes a fixed echo answer, no JSON decoding, no goroutine per
// call). Read the ratio Serve/baseline, not the absolute numbers.
func BenchmarkEcho(b *testing.B) {
	for _, conc := range []int{1, 32} {
		b.Run(fmt.Sprintf("baseline/conc=%d", conc), func(b *testing.B) {
			benchRoundTrips(b, conc, func(in io.ReadCloser, out io.WriteCloser) func() {
				done := make(chan struct{})
				go func() {
					defer close(done)
					defer out.Close()
					br := bufio.NewReader(in)
					bw := bufio.NewWriter(out)
					for {
						l, err := br.ReadSlice('\n')
						if err != nil {
							return
						}
						id := gjson.GetBytes(l, "id").Raw
						fmt.Fprintf(bw, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"hi"}]}}`+"\n", id)
						if bw.Flush() != nil {
							return
						}
					}
				}()
				return func() { in.Close(); <-done }
			})
		})
		b.Run(fmt.Sprintf("serve/conc=%d", conc), func(b *testing.B) {
			benchRoundTrips(b, conc, func(in io.ReadCloser, out io.WriteCloser) func() {
				done := make(chan struct{})
				go func() {
					defer close(done)
					_ = Serve(context.Background(), in, out, io.Discard, Scenario{})
				}()
				return func() { in.Close(); <-done }
			})
		})
	}
}

// benchRoundTrips runs b.N echo calls from conc workers, each waiting for
// its answer before sending the next, against the peer start returns.
func benchRoundTrips(b *testing.B, conc int, start func(in io.ReadCloser, out io.WriteCloser) (stop func())) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	stop := start(inR, outW)
	answers := make([]chan struct{}, conc)
	for i := range answers {
		answers[i] = make(chan struct{}, 1)
	}
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		br := bufio.NewReader(outR)
		for {
			l, err := br.ReadSlice('\n')
			if err != nil {
				return
			}
			answers[gjson.GetBytes(l, "id").Int()%int64(conc)] <- struct{}{}
		}
	}()
	var wmu sync.Mutex
	var wg sync.WaitGroup
	b.ReportAllocs()
	b.ResetTimer()
	for w := range conc {
		n := b.N / conc
		if w < b.N%conc {
			n++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range n {
				id := int64(i*conc + w)
				line := `{"jsonrpc":"2.0","id":` + strconv.FormatInt(id, 10) +
					`,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}` + "\n"
				wmu.Lock()
				_, err := io.WriteString(inW, line)
				wmu.Unlock()
				if err != nil {
					b.Error(err)
					return
				}
				<-answers[w]
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	inW.Close()
	stop()
	<-readDone
	outR.Close()
}
