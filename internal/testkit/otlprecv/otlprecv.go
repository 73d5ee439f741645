// Package otlprecv implements an in-process OTLP trace receiver for
// tests: OTLP/HTTP (protobuf) and OTLP/gRPC on loopback sockets, keeping
// every span it is sent, decoded with the protocol's own protobuf types.
package otlprecv

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// maxBody bounds one export request's body.
const maxBody = 16 << 20

// Span is one received span, flattened for assertions.
type Span struct {
	Name                      string
	TraceID, SpanID, ParentID string // lowercase hex; ParentID "" for a root
	Kind                      tracepb.Span_SpanKind
	Attrs                     map[string]string // every value rendered as text
	StatusCode                tracepb.Status_StatusCode
	StatusMessage             string
	Service                   string // the resource's service.name
}

// Receiver keeps what exporters sent it. Its methods may be called
// concurrently.
type Receiver struct {
	// URL is the OTLP/HTTP base URL ("http://127.0.0.1:port"), GRPC the
	// gRPC endpoint URL, when started.
	URL, GRPC string

	mu    sync.Mutex
	spans []Span
	raw   [][]byte // every request body as it arrived, for scans
	added chan struct{}
}

// Start starts a receiver on loopback serving OTLP/HTTP and OTLP/gRPC;
// both stop when the test ends.
func Start(t testing.TB) *Receiver {
	t.Helper()
	r := &Receiver{added: make(chan struct{}, 1)}

	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: http.HandlerFunc(r.serveHTTP), ReadHeaderTimeout: 10 * time.Second}
	hdone := make(chan struct{})
	go func() { defer close(hdone); _ = hs.Serve(hl) }()
	r.URL = "http://" + hl.Addr().String()

	gl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(gs, grpcService{r: r})
	gdone := make(chan struct{})
	go func() { defer close(gdone); _ = gs.Serve(gl) }()
	r.GRPC = "http://" + gl.Addr().String()

	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = hs.Shutdown(ctx)
		<-hdone
		gs.Stop()
		<-gdone
	})
	return r
}

func (r *Receiver) serveHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
		http.Error(w, "OTLP traces are posted to /v1/traces", http.StatusNotFound)
		return
	}
	if req.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "want application/x-protobuf", http.StatusUnsupportedMediaType)
		return
	}
	var body io.Reader = http.MaxBytesReader(w, req.Body, maxBody)
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = io.LimitReader(zr, maxBody)
	}
	b, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var m coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &m); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.add(&m, b)
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

type grpcService struct {
	coltracepb.UnimplementedTraceServiceServer
	r *Receiver
}

func (g grpcService) Export(_ context.Context, m *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	b, err := proto.Marshal(m)
	if err != nil {
		return nil, err
	}
	g.r.add(m, b)
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

func (r *Receiver) add(m *coltracepb.ExportTraceServiceRequest, raw []byte) {
	var got []Span
	for _, rs := range m.GetResourceSpans() {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				service = text(kv.GetValue())
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				sp := Span{
					Name: s.GetName(), Kind: s.GetKind(), Service: service,
					TraceID: hex.EncodeToString(s.GetTraceId()), SpanID: hex.EncodeToString(s.GetSpanId()), ParentID: hex.EncodeToString(s.GetParentSpanId()),
					StatusCode: s.GetStatus().GetCode(), StatusMessage: s.GetStatus().GetMessage(),
					Attrs: map[string]string{},
				}
				for _, kv := range s.GetAttributes() {
					sp.Attrs[kv.GetKey()] = text(kv.GetValue())
				}
				got = append(got, sp)
			}
		}
	}
	r.mu.Lock()
	r.spans = append(r.spans, got...)
	r.raw = append(r.raw, bytes.Clone(raw))
	r.mu.Unlock()
	select {
	case r.added <- struct{}{}:
	default:
	}
}

func text(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return strconv.FormatInt(x.IntValue, 10)
	case *commonpb.AnyValue_BoolValue:
		if x.BoolValue {
			return "true"
		}
		return "false"
	default:
		return v.String()
	}
}

// Spans returns every span received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Raw returns every export request's bytes (decompressed protobuf), so a
// test can scan all that was sent, attributes, events and resource
// included, for what must not be there.
func (r *Receiver) Raw() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]byte(nil), r.raw...)
}

// ErrTimeout is what Wait returns when its spans did not come in time.
var ErrTimeout = errors.New("otlprecv: the spans did not arrive")

// Wait waits until cond holds over the spans received, or d passes.
func (r *Receiver) Wait(d time.Duration, cond func([]Span) bool) error {
	limit := time.NewTimer(d)
	defer limit.Stop()
	for !cond(r.Spans()) {
		select {
		case <-r.added:
		case <-limit.C:
			return ErrTimeout
		}
	}
	return nil
}
