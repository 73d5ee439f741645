module github.com/capbridge/capbridge

go 1.26.0

require (
	github.com/VictoriaMetrics/metrics v1.45.0
	github.com/evanw/esbuild v0.25.12
	github.com/pelletier/go-toml/v2 v2.4.3
	github.com/prometheus/client_model v0.6.3
	github.com/prometheus/common v0.74.0
	github.com/rs/zerolog v1.35.1
	github.com/tailscale/hujson v0.0.0-20260727124030-b80ff77dac4f
	github.com/tidwall/gjson v1.20.4
	github.com/vmihailenco/msgpack/v5 v5.4.1
	golang.org/x/sys v0.50.0
)

require (
	github.com/mattn/go-colorable v0.1.14 // indirect
	github.com/mattn/go-isatty v0.0.20 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/pandatix/go-abnf v0.5.5 // indirect
	github.com/tidwall/match v1.1.1 // indirect
	github.com/tidwall/pretty v1.3.0 // indirect
	github.com/valyala/fastrand v1.1.0 // indirect
	github.com/valyala/histogram v1.2.0 // indirect
	github.com/vmihailenco/tagparser/v2 v2.0.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)
