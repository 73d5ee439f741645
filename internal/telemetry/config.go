package telemetry

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Protocols an exporter speaks, by their OTEL_EXPORTER_OTLP_PROTOCOL names.
const (
	ProtocolHTTP = "http/protobuf"
	ProtocolGRPC = "grpc"
)

// Samplers, by their OTEL_TRACES_SAMPLER names (OpenTelemetry's
// "General SDK Configuration").
var Samplers = []string{"always_on", "always_off", "traceidratio", "parentbased_always_on", "parentbased_always_off", "parentbased_traceidratio"}

// DefaultShutdownTimeout bounds the flush at shutdown when the
// configuration names no bound.
const DefaultShutdownTimeout = 5 * time.Second

// Config is the [telemetry] table: each field set there wins over the
// environment variable of the same meaning, and a field left zero takes
// the environment's value, then the default.
type Config struct {
	// Endpoint is the OTLP base URL, as OTEL_EXPORTER_OTLP_ENDPOINT: over
	// HTTP the traces go to its path + "/v1/traces".
	Endpoint string
	// Protocol is ProtocolHTTP or ProtocolGRPC.
	Protocol string
	// ServiceName is the service.name resource attribute.
	ServiceName string
	// Sampler is one of Samplers; SamplerArg its argument (the ratio of
	// the traceidratio samplers), when SamplerArgSet.
	Sampler       string
	SamplerArg    float64
	SamplerArgSet bool
	// ShutdownTimeout bounds the flush of the spans still queued at
	// shutdown.
	ShutdownTimeout time.Duration
}

// settings is a Config resolved against the environment: what New builds.
type settings struct {
	url      *url.URL // the traces endpoint, path final for HTTP
	protocol string
	service  string
	sampler  string
	ratio    float64
	timeout  time.Duration
}

// envError is a bad value in an OpenTelemetry environment variable.
func envError(name, value, fix string) error {
	return fmt.Errorf("telemetry: %s=%q: %s", name, value, fix)
}

// errDisabled is what resolve reports when traces are off: nothing
// configured an endpoint, or OTEL_SDK_DISABLED or OTEL_TRACES_EXPORTER
// turned them off.
var errDisabled = errors.New("telemetry: off")

// resolve merges cfg over the environment and validates the result.
func resolve(cfg Config, getenv func(string) string) (settings, error) {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return settings{}, errDisabled
	}
	switch exp := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); exp {
	case "", "otlp":
	case "none":
		return settings{}, errDisabled
	default:
		return settings{}, envError("OTEL_TRACES_EXPORTER", exp, `capbridge exports traces over OTLP only: set it to "otlp" or "none", or unset it`)
	}
	s := settings{protocol: cfg.Protocol, service: cfg.ServiceName, sampler: cfg.Sampler, ratio: cfg.SamplerArg, timeout: cfg.ShutdownTimeout}
	if s.protocol == "" {
		for _, name := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
			if v := strings.TrimSpace(getenv(name)); v != "" {
				if v != ProtocolHTTP && v != ProtocolGRPC {
					return settings{}, envError(name, v, `capbridge speaks "http/protobuf" and "grpc"`)
				}
				s.protocol = v
				break
			}
		}
	}
	if s.protocol == "" {
		s.protocol = ProtocolHTTP
	}

	// The endpoint: the table's (a base URL), else the signal's own
	// variable (used as it is), else the general one (a base URL).
	raw, base, from := cfg.Endpoint, true, "[telemetry] endpoint"
	if raw == "" {
		if v := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")); v != "" {
			raw, base, from = v, false, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
		} else if v := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_ENDPOINT")); v != "" {
			raw, from = v, "OTEL_EXPORTER_OTLP_ENDPOINT"
		}
	}
	if raw == "" {
		return settings{}, errDisabled
	}
	u, err := ParseEndpoint(raw)
	if err != nil {
		return settings{}, fmt.Errorf("telemetry: %s: %w", from, err)
	}
	if base && s.protocol == ProtocolHTTP {
		// OTLP/HTTP: "the signal's path appended to the base URL".
		u.Path = strings.TrimSuffix(u.Path, "/") + "/v1/traces"
	}
	s.url = u

	if s.service == "" {
		s.service = strings.TrimSpace(getenv("OTEL_SERVICE_NAME"))
	}
	if s.service == "" {
		s.service = "capbridge"
	}
	if s.sampler == "" {
		if v := strings.ToLower(strings.TrimSpace(getenv("OTEL_TRACES_SAMPLER"))); v != "" {
			if !slices.Contains(Samplers, v) {
				return settings{}, envError("OTEL_TRACES_SAMPLER", v, "use one of "+strings.Join(Samplers, ", "))
			}
			s.sampler = v
		}
	}
	if s.sampler == "" {
		s.sampler = "parentbased_always_on" // the specification's default
	}
	if !cfg.SamplerArgSet {
		s.ratio = 1
		if v := strings.TrimSpace(getenv("OTEL_TRACES_SAMPLER_ARG")); v != "" && strings.HasSuffix(s.sampler, "traceidratio") {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || !(f >= 0 && f <= 1) {
				return settings{}, envError("OTEL_TRACES_SAMPLER_ARG", v, "write the ratio of traces sampled, from 0 to 1, such as 0.25")
			}
			s.ratio = f
		}
	}
	if s.timeout <= 0 {
		s.timeout = DefaultShutdownTimeout
	}
	return s, nil
}

// ParseEndpoint checks an OTLP endpoint: an http or https URL with a
// host, and no user, query or fragment (which the exporters would
// silently drop or misread). Its errors quote the endpoint as
// shownEndpoint does.
func ParseEndpoint(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return nil, fmt.Errorf("%q is not a URL", shownEndpoint(raw))
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("%q: write an http:// or https:// URL, such as http://127.0.0.1:4318", shownEndpoint(raw))
	case u.Host == "":
		return nil, fmt.Errorf("%q names no host", shownEndpoint(raw))
	case u.User != nil || u.RawQuery != "" || u.Fragment != "":
		return nil, fmt.Errorf("%q: an OTLP endpoint has no user, query or fragment", shownEndpoint(raw))
	}
	return u, nil
}

// redactedPart stands for what shownEndpoint leaves out (url.URL's
// Redacted uses it too).
const redactedPart = "xxxxx"

// shownEndpoint is raw as an error may quote it: with its password (its
// user when it has none: a token written as the user), each query value
// and its fragment replaced by xxxxx, so that the mistake shows and the
// credential does not (a collector's ingest password or API key is
// what a user or query in an endpoint usually is). What does not parse
// as a URL is cut before its first '?' or '#', and what may be userinfo
// (up to an '@' in its authority) is replaced.
func shownEndpoint(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		rest, cut := raw, ""
		if i := strings.IndexAny(rest, "?#"); i >= 0 {
			rest, cut = rest[:i], rest[i:i+1]+redactedPart
		}
		scheme, authority, ok := strings.Cut(rest, "://")
		if !ok {
			scheme, authority = "", rest
		}
		path := ""
		if i := strings.IndexByte(authority, '/'); i >= 0 {
			authority, path = authority[:i], authority[i:]
		}
		if i := strings.LastIndexByte(authority, '@'); i >= 0 {
			authority = redactedPart + authority[i:]
		}
		if ok {
			scheme += "://"
		}
		return scheme + authority + path + cut
	}
	// "user:password@host" without "//" parses as an opaque URL whose
	// scheme is the user.
	if i := strings.LastIndexByte(u.Opaque, '@'); i >= 0 {
		u.Opaque = redactedPart + u.Opaque[i:]
	}
	if u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), redactedPart)
		} else {
			u.User = url.User(redactedPart)
		}
	}
	if u.RawQuery != "" {
		parts := strings.Split(u.RawQuery, "&")
		for i, p := range parts {
			if k, _, ok := strings.Cut(p, "="); ok {
				parts[i] = k + "=" + redactedPart
			} else {
				parts[i] = redactedPart
			}
		}
		u.RawQuery = strings.Join(parts, "&")
	}
	if u.Fragment != "" {
		u.Fragment, u.RawFragment = redactedPart, ""
	}
	return u.String()
}
