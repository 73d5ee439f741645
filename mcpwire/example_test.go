package mcpwire_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/capbridge/capbridge/internal/testkit/mcptest"
	"github.com/capbridge/capbridge/mcpwire"
)

func ExampleStart() {
	// The server's command line, such as
	// {"npx", "-y", "@modelcontextprotocol/server-everything"}; here, this
	// test binary serving mcptest's tools.
	argv, env := mcptest.Command(mcptest.Scenario{})

	// Start's ctx bounds the handshake, not the server's life: that
	// lasts until Close.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := mcpwire.Start(ctx, mcpwire.Command{Argv: argv, Env: env, Inherit: []string{"PATH", "HOME"}}, mcpwire.Config{})
	if err != nil {
		log.Fatal(err) // a *mcpwire.DeadError, with the server's stderr tail
	}
	defer c.Close()

	r, err := c.CallTool(ctx, "add", mcpwire.JSONArgs([]byte(`{"a":2,"b":3}`)), mcpwire.CallOptions{})
	if err != nil {
		log.Fatal(err) // the call failed: an *mcpwire.RPCError, mcpwire.ErrTimeout, ...
	}
	if r.IsError {
		// The tool ran and failed: its own words are the content.
		log.Fatal(r.Content[0].Text)
	}
	fmt.Println(r.Content[0].Type, r.Content[0].Text)
	fmt.Println(string(r.StructuredContent))
	// Output:
	// text 5
	// {"sum":5}
}
