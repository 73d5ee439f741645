package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/capbridge/capbridge/bridge/internal/quota"
)

// keySpec is one key of capbridge.toml: what the reader accepts there,
// said once for the schema and for the messages that list known keys.
type keySpec struct {
	name string
	kind keyKind
	doc  string
	enum []string // kindEnum's values
	lo   int64    // kindSize's bounds
	hi   int64
}

type keyKind int

const (
	kindString keyKind = iota
	kindPath
	kindMode
	kindDuration
	kindSize
	kindCount
	kindCountOrZero
	kindEnum
	kindBool
	kindUIDs
	kindStrings
	kindEnv
	kindEnvNames
	kindTools
	kindLoopback
	kindFile
	kindRestrict
	kindHeaders
	kindOAuth
	kindRate
	kindTotal
	kindQuota
	kindURL
	kindRatio
)

var bridgeSpec = []keySpec{
	{name: "call_socket", kind: kindPath, doc: "the socket handed into jails; default $XDG_RUNTIME_DIR/capbridge/call.sock, else /tmp/capbridge-$UID/call.sock"},
	{name: "control_socket", kind: kindPath, doc: "the operator's socket, always mode 0600; default beside call_socket"},
	{name: "call_socket_mode", kind: kindMode, doc: `octal mode of the call socket; default "0600"; world bits need allowed_uids`},
	{name: "call_socket_group", kind: kindString, doc: "group name or numeric gid of the call socket; default the process's group"},
	{name: "allowed_uids", kind: kindUIDs, doc: "peers allowed on the call socket; default any"},
	{name: "max_frame", kind: kindSize, lo: 1, hi: maxFrameLimit, doc: `capwire frame cap, bytes or "NKiB"/"NMiB"; default "16MiB"`},
	{name: "max_connections", kind: kindCount, doc: "authenticated connections on the call socket; default 1024"},
	{name: "max_conns_per_grant", kind: kindCount, doc: "authenticated connections of one grant; default 16"},
	{name: "max_conns_per_uid", kind: kindCount, doc: "authenticated connections of one peer uid; default 512"},
	{name: "max_unauth_connections", kind: kindCount, doc: "call-socket connections that have not said hello; when full, the oldest is dropped; default 64"},
	{name: "max_unauth_per_uid", kind: kindCount, doc: "of those, one peer uid's; when full, its oldest is dropped; default 16"},
	{name: "hello_timeout", kind: kindDuration, doc: `the hello must arrive within it; default "3s"`},
	{name: "idle_timeout", kind: kindDuration, doc: `an authenticated connection with no call in flight for this long is closed; default "5m"`},
	{name: "frame_timeout", kind: kindDuration, doc: `a frame whose first byte has arrived must be complete within it; default "10s"`},
	{name: "max_partial_bytes", kind: kindSize, lo: minPartialBytes, hi: maxPartialLimit, doc: `bytes held for partial frames, all connections together; beyond it the largest is refused; default "64MiB"`},
	{name: "max_conn_inflight", kind: kindCount, doc: "calls in flight per connection; default 64"},
	{name: "procs", kind: kindCount, doc: "threads running the bridge's Go code at once (GOMAXPROCS); the GOMAXPROCS environment variable wins when set; default 1, measured fastest on 2 CPUs"},
	{name: "max_result_text", kind: kindSize, lo: 1, hi: maxFrameLimit, doc: `text kept per result before truncation; default "1MiB"`},
	{name: "max_result_data", kind: kindSize, lo: 0, hi: maxFrameLimit, doc: `image, audio and resource bytes carried per result; a block past it carries its size and MIME type only; 0 carries none; default "1MiB"`},
	{name: "write_timeout", kind: kindDuration, doc: `a reader that stalls longer is dropped; default "5s"`},
	{name: "shutdown_grace", kind: kindDuration, doc: `how long shutdown waits for calls in flight; default "3s"`},
	{name: "surface_budget", kind: kindSize, lo: 1024, hi: maxFrameLimit, doc: `size budget of a server's surface; default "64KiB"`},
	{name: "log_format", kind: kindEnum, enum: []string{"auto", "json", "console"}, doc: `default "auto": console on a terminal, else JSON lines`},
	{name: "log_level", kind: kindEnum, enum: []string{"debug", "info", "warn", "error"}, doc: `default "info"`},
	{name: "audit_values", kind: kindBool, doc: "log argument and result values in the audit trail; default false"},
	{name: "audit_path", kind: kindPath, doc: "the audit trail's own file, opened for appending and created mode 0600; SIGHUP reopens it (for logrotate); default: the audit lines go with the logs"},
	{name: "audit_fail", kind: kindEnum, enum: auditFails, doc: `what calls get while the audit trail cannot be written (a full disk): closed refuses them "overloaded" until it can; open serves them and counts the lines lost; default "closed"`},
	{name: "audit_grant_budget", kind: kindSize, lo: minAuditGrantBudget, hi: maxAuditGrantBudget, doc: `bytes of audit lines one grant may cause; once spent its calls are refused (audit_fail closed) or served unaudited and counted (open); default "64MiB"`},
	{name: "metrics_listen", kind: kindLoopback, doc: `serve Prometheus metrics at /metrics: on a loopback address ("127.0.0.1:9464"), which every local user can reach, or on a Unix socket only capbridge's user can ("unix:/run/capbridge/metrics.sock", mode 0600); at most 32 connections, idle ones closed after 5 s; default none`},
	{name: "lock", kind: kindFile, doc: "the lock file (capbridge lock) serve holds every server's tools to, absolute or relative to this file; a tool it does not name is absent; default none"},
	{name: "lock_mode", kind: kindEnum, enum: lockModes, doc: `enforce: a tool that differs from the lock is withheld and its calls denied surface_changed; warn: it is served and the drift reported; default "enforce"`},
}

var serverSpec = []keySpec{
	{name: "command", kind: kindString, doc: "argv[0], never a shell string; required unless url names a remote server"},
	{name: "args", kind: kindStrings, doc: "the arguments"},
	{name: "env", kind: kindEnv, doc: "variables passed explicitly"},
	{name: "inherit_env", kind: kindEnvNames, doc: "names passed through from capbridge's environment; default PATH, HOME, LANG and the like"},
	{name: "cwd", kind: kindPath, doc: "the working directory"},
	{name: "startup_timeout", kind: kindDuration, doc: `spawn, handshake and list tools within this, each attempt; default "2m"`},
	{name: "restart", kind: kindEnum, enum: restartPolicies, doc: `when to start the server again after a failed boot or an exit: never, on-failure (any end but a clean exit) or always; default "on-failure"`},
	{name: "restart_backoff", kind: kindDuration, doc: `the first wait before a restart, doubled (with jitter) for each one after; default "1s"`},
	{name: "restart_max", kind: kindDuration, doc: `the longest wait between restarts, and how long a server must serve for the wait to start again from restart_backoff; default "1m"`},
	{name: "call_timeout", kind: kindDuration, doc: `a call's idle deadline when the caller names none: each progress notification renews it, up to max_call_timeout; default "60s"`},
	{name: "max_call_timeout", kind: kindDuration, doc: `the most a caller may ask for; default "10m"`},
	{name: "cancel_grace", kind: kindDuration, doc: `how long a cancelled or timed-out call keeps its max_inflight slot while the server has not answered it (MCP cancellation is advisory); default "5s"`},
	{name: "max_inflight", kind: kindCount, doc: "concurrent calls sent to this server; default 32"},
	{name: "max_queue", kind: kindCountOrZero, doc: `calls waiting beyond max_inflight; more are "overloaded"; default 64`},
	{name: "max_inflight_per_grant", kind: kindCount, doc: "one grant's share of max_inflight; default half of it, at least 1"},
	{name: "max_queue_per_grant", kind: kindCountOrZero, doc: "one grant's share of max_queue; default half of it"},
	{name: "tools", kind: kindTools, doc: "tools.allow: only these are generated and callable; tools.deny: these are absent"},
	{name: "stderr_to_caller", kind: kindBool, doc: "show callers the end of the server's stderr (env values redacted, at most 2 KiB) when it fails; default false: only the operator sees it"},
	{name: "destructive", kind: kindStrings, doc: "tools the operator declares destructive: callable only by a grant that names them (--tools) or allows destructive tools (--allow-destructive); a tool the server marks destructiveHint: true is destructive too, and stays so for the life of the process"},
	{name: "not_destructive", kind: kindStrings, doc: "tools whose server's destructiveHint: true the operator overrides: not destructive; a server's claim that a tool is not destructive is never needed nor trusted"},
	{name: "restrict", kind: kindRestrict, doc: `argument guards: a table per tool, in it a table per JSON Pointer into the arguments ("/path") with values, prefix, pattern, min, max and optional; a call that breaks one is denied not_granted`},
	{name: "quota", kind: kindQuota, doc: "each grant's default quotas on this server's calls (rate, burst, calls, bytes_in, bytes_out, time), and in its tools table, per tool; a grant request sets its own over them; a call beyond one is denied quota_exceeded"},
}

var (
	bridgeKeys = specNames(bridgeSpec)
	serverKeys = specNames(append(slices.Clip(serverSpec), remoteSpec...))
)

func specNames(spec []keySpec) []string {
	names := make([]string, len(spec))
	for i, k := range spec {
		names[i] = k.name
	}
	return names
}

// JSONSchema returns a JSON Schema (draft 2020-12) of capbridge.toml, for
// editors that check TOML against one. It says what the reader accepts
// key by key; rules that relate keys (call_timeout at most
// max_call_timeout, a world-writable socket needing allowed_uids) are the
// reader's alone.
func JSONSchema() ([]byte, error) {
	server := object(append(slices.Clip(serverSpec), remoteSpec...))
	server["oneOf"] = []any{map[string]any{"required": []string{"command"}}, map[string]any{"required": []string{"url"}}}
	doc := map[string]any{
		"$schema":              "https://json-schema.org/draft/2020-12/schema",
		"$id":                  "https://github.com/capbridge/capbridge/docs/capbridge.schema.json",
		"title":                "capbridge.toml",
		"description":          "capbridge's configuration: the [bridge] table and one [mcp.<name>] table per MCP server.",
		"type":                 "object",
		"additionalProperties": false,
		"properties": map[string]any{
			"bridge":    object(bridgeSpec),
			"quota":     withDoc(object(quotaSpec), "each grant's default quotas on all its calls; a grant request sets its own over them; a call beyond one is denied quota_exceeded"),
			"telemetry": withDoc(object(telemetrySpec), "OpenTelemetry traces over OTLP: a span per capwire call and per MCP request, and spans for servers' boots, restarts, re-listings and lock drift; each key wins over its OTEL_* environment variable; off unless an endpoint is set here or in the environment"),
			"mcp": map[string]any{
				"description":          "the MCP servers capbridge runs, by name",
				"type":                 "object",
				"maxProperties":        maxServers,
				"propertyNames":        map[string]any{"pattern": validName.String()},
				"additionalProperties": server,
			},
		},
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("config: encoding the schema: %w", err)
	}
	return out.Bytes(), nil
}

func withDoc(o map[string]any, doc string) map[string]any {
	o["description"] = doc
	return o
}

func object(spec []keySpec) map[string]any {
	props := map[string]any{}
	for _, k := range spec {
		s := k.schema()
		s["description"] = k.doc
		props[k.name] = s
	}
	return map[string]any{"type": "object", "additionalProperties": false, "properties": props}
}

func (k keySpec) schema() map[string]any {
	str := func(pattern string) map[string]any { return map[string]any{"type": "string", "pattern": pattern} }
	strs := map[string]any{"type": "array", "items": map[string]any{"type": "string"}}
	switch k.kind {
	case kindPath:
		return str("^/")
	case kindMode:
		return str("^0?[0-7]{3}$")
	case kindDuration:
		return str(`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`)
	case kindSize:
		return map[string]any{"oneOf": []any{
			map[string]any{"type": "integer", "minimum": k.lo, "maximum": k.hi},
			str(`^[0-9]+ ?(B|KiB|MiB|GiB)?$`),
		}}
	case kindCount:
		return map[string]any{"type": "integer", "minimum": 1, "maximum": maxCountSetting}
	case kindCountOrZero:
		return map[string]any{"type": "integer", "minimum": 0, "maximum": maxCountSetting}
	case kindEnum:
		return map[string]any{"enum": k.enum}
	case kindBool:
		return map[string]any{"type": "boolean"}
	case kindUIDs:
		return map[string]any{"type": "array", "items": map[string]any{"type": "integer", "minimum": 0, "maximum": 1<<32 - 2}}
	case kindStrings:
		return strs
	case kindEnv:
		return map[string]any{"type": "object", "propertyNames": map[string]any{"pattern": envName.String()}, "additionalProperties": map[string]any{"type": "string"}}
	case kindEnvNames:
		return map[string]any{"type": "array", "items": str(envName.String())}
	case kindLoopback:
		return str(`^((127\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}|\[::1\]):[0-9]{1,5}|unix:/.+)$`)
	case kindFile:
		return map[string]any{"type": "string", "minLength": 1}
	case kindRestrict:
		num := map[string]any{"type": "number"}
		guard := map[string]any{"type": "object", "additionalProperties": false, "minProperties": 1, "properties": map[string]any{
			"values":   map[string]any{"type": "array", "minItems": 1, "items": map[string]any{"type": []string{"string", "number", "boolean"}}},
			"prefix":   map[string]any{"type": "string"},
			"pattern":  map[string]any{"type": "string"},
			"min":      num,
			"max":      num,
			"optional": map[string]any{"type": "boolean"},
		}}
		return map[string]any{"type": "object", "additionalProperties": map[string]any{
			"type": "object", "propertyNames": map[string]any{"pattern": "^/"}, "additionalProperties": guard,
		}}
	case kindOAuth:
		str := map[string]any{"type": "string"}
		return map[string]any{"type": "object", "additionalProperties": false, "properties": map[string]any{
			"grant":     map[string]any{"enum": []string{GrantAuthorizationCode, GrantClientCredentials, GrantIDJAG}},
			"client_id": str, "client_secret_env": str, "client_secret_file": str, "private_key_file": str, "key_id": str,
			"scopes":              map[string]any{"type": "array", "items": str},
			"client_metadata_url": str, "issuer": str, "idp_issuer": str, "idp_client_id": str, "idp_client_secret_env": str,
			"idp_client_secret_file": str, "id_token_env": str, "id_token_file": str,
		}}
	case kindHeaders:
		return map[string]any{"type": "object", "additionalProperties": map[string]any{"type": "string"}}
	case kindTools:
		return map[string]any{"type": "object", "additionalProperties": false, "properties": map[string]any{"allow": strs, "deny": strs}}
	case kindRate:
		return map[string]any{"type": "number", "minimum": quota.MinRate, "maximum": quota.MaxRate}
	case kindTotal:
		return map[string]any{"type": "integer", "minimum": 1, "maximum": int64(maxQuotaCalls)}
	case kindURL:
		return str("^https?://[^/?#@]+")
	case kindRatio:
		return map[string]any{"type": "number", "minimum": 0, "maximum": 1}
	case kindQuota:
		q := object(quotaSpec)
		q["properties"].(map[string]any)["tools"] = map[string]any{"type": "object", "description": "quotas per tool, by the tool's wire name", "additionalProperties": object(quotaSpec)}
		return q
	}
	return map[string]any{"type": "string"}
}
