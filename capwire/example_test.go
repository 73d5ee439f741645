package capwire_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/capbridge/capbridge/capwire"
)

func ExampleDial() {
	socket, stop := fakeCapbridge()
	defer stop()

	ctx := context.Background()
	c, err := capwire.Dial(ctx, socket, "granted-token")
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	fmt.Println("the grant reaches", c.Servers())

	// capbridge refuses a token it did not hand out.
	_, err = capwire.Dial(ctx, socket, "forged-token")
	fmt.Println("forged token refused:", errors.Is(err, capwire.ErrBadToken))
	// Output:
	// the grant reaches [github]
	// forged token refused: true
}

func ExampleShared() {
	// The program runs under capbridge, which set CAPBRIDGE_SOCKET and
	// CAPBRIDGE_TOKEN in its environment.
	stop := launchUnderCapbridge()
	defer stop()

	ctx := context.Background()
	c, err := capwire.Shared(ctx)
	if err != nil {
		log.Fatal(err) // capwire.ErrNoEnv outside capbridge
	}
	res, err := c.Call(ctx, "github", "create_issue", map[string]any{"title": "Crash on start"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Text())
	// Output: Created issue #42: Crash on start
}

func ExampleClient_Call() {
	stop := launchUnderCapbridge()
	defer stop()

	ctx := context.Background()
	c, err := capwire.FromEnv(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	res, err := c.Call(ctx, "github", "create_issue", map[string]any{"title": "Crash on start"})
	if err != nil {
		log.Fatal(err)
	}
	if res.IsError {
		// The tool ran and failed: its own words are the content.
		log.Fatal(res.Text())
	}
	fmt.Println(res.Text())

	// A call capbridge refuses is a *Denied, whose Code says why.
	_, err = c.Call(ctx, "github", "delete_repo", map[string]any{"repo": "acme/app"})
	var d *capwire.Denied
	if errors.As(err, &d) {
		fmt.Printf("denied (%s): %s\n", d.Code, d.Message)
		fmt.Println("worth retrying:", capwire.Retryable(d.Code))
	}
	fmt.Println("not granted:", errors.Is(err, capwire.ErrNotGranted))
	// Output:
	// Created issue #42: Crash on start
	// denied (not_granted): the grant does not reach github/delete_repo
	// worth retrying: false
	// not granted: true
}

func ExampleResult_Decode() {
	stop := launchUnderCapbridge()
	defer stop()

	ctx := context.Background()
	c, err := capwire.FromEnv(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	res, err := c.Call(ctx, "github", "create_issue", map[string]any{"title": "Crash on start"})
	if err != nil {
		log.Fatal(err)
	}
	// The tool's structured content fills a struct as encoding/json
	// would fill it from JSON.
	var issue struct {
		Number int    `json:"number"`
		URL    string `json:"url"`
	}
	if err := res.Decode(&issue); err != nil {
		log.Fatal(err)
	}
	fmt.Println(issue.Number, issue.URL)
	// Output: 42 https://github.example/acme/app/issues/42
}

// launchUnderCapbridge plays the part of whoever starts a program under
// capbridge: it starts a fake capbridge and sets CAPBRIDGE_SOCKET and
// CAPBRIDGE_TOKEN. stop ends the fake and restores the environment.
func launchUnderCapbridge() (stop func()) {
	socket, stopFake := fakeCapbridge()
	restoreSocket := setenv(capwire.EnvSocket, socket)
	restoreToken := setenv(capwire.EnvToken, "granted-token")
	return func() {
		restoreToken()
		restoreSocket()
		stopFake()
	}
}

func setenv(key, value string) (restore func()) {
	was, had := os.LookupEnv(key)
	os.Setenv(key, value)
	return func() {
		if had {
			os.Setenv(key, was)
		} else {
			os.Unsetenv(key)
		}
	}
}

// fakeCapbridge stands in for capbridge on a Unix socket, speaking wire v1
// with capwire's own codec: it welcomes the token "granted-token" with a
// grant reaching the server github, answers github/create_issue, and
// denies every other call as not granted. stop closes every connection
// and waits until each is done.
func fakeCapbridge() (socket string, stop func()) {
	dir, err := os.MkdirTemp("", "capwire-example")
	if err != nil {
		log.Fatal(err)
	}
	socket = filepath.Join(dir, "capbridge.sock")
	ln, err := net.Listen("unix", socket)
	if err != nil {
		log.Fatal(err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns = map[net.Conn]bool{}
	)
	wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns[conn] = true
			mu.Unlock()
			wg.Go(func() { serveFake(conn) })
		}
	})
	return socket, func() {
		ln.Close()
		mu.Lock()
		for conn := range conns {
			conn.Close()
		}
		mu.Unlock()
		wg.Wait()
		os.RemoveAll(dir)
	}
}

// serveFake answers one connection's frames until it ends.
func serveFake(conn net.Conn) {
	defer conn.Close()
	fr := capwire.NewFrameReader(conn, 0)
	send := func(m capwire.Message) error {
		frame, err := capwire.AppendFrame(nil, m, 0)
		if err == nil {
			_, err = conn.Write(frame)
		}
		return err
	}
	for {
		payload, err := fr.ReadFrame(nil)
		if err != nil {
			return
		}
		m, err := capwire.Decode(payload)
		if err != nil {
			return // capbridge would answer with a denial or a fatal frame
		}
		var reply capwire.Message
		switch m := m.(type) {
		case *capwire.HelloMsg:
			if m.Token != "granted-token" {
				send(&capwire.FatalMsg{Code: capwire.CodeBadToken, Message: "token not accepted"})
				return
			}
			reply = &capwire.WelcomeMsg{V: capwire.Version, Servers: []string{"github"}}
		case *capwire.CallMsg:
			reply = answerFake(m)
		default:
			continue // a cancel: every call here is answered at once
		}
		if send(reply) != nil {
			return
		}
	}
}

func answerFake(call *capwire.CallMsg) capwire.Message {
	server := strings.TrimPrefix(call.Cap, capwire.CapPrefix)
	if server != "github" || call.Op != "create_issue" {
		return &capwire.DeniedMsg{ID: call.ID, Denial: capwire.Denied{
			Code:    capwire.CodeNotGranted,
			Message: "the grant does not reach " + server + "/" + call.Op,
		}}
	}
	var args struct {
		Title string `msgpack:"title"`
	}
	if err := msgpack.Unmarshal(call.Args, &args); err != nil {
		return &capwire.DeniedMsg{ID: call.ID, Denial: capwire.Denied{Code: capwire.CodeBadArguments, Message: err.Error()}}
	}
	structured, err := msgpack.Marshal(map[string]any{"number": 42, "url": "https://github.example/acme/app/issues/42"})
	if err != nil {
		log.Fatal(err)
	}
	return &capwire.ResultMsg{ID: call.ID, Result: capwire.Result{
		Content:    []capwire.Block{{Type: capwire.BlockText, Kind: capwire.KindText, Text: "Created issue #42: " + args.Title}},
		Structured: structured,
	}}
}

// An optional field of a façade's arguments is a pointer; Ptr fills one
// of any type, and a type argument makes a constant the field's type.
func ExamplePtr() {
	type args struct {
		Count   *float64
		Verbose *bool
		Name    *string
	}
	a := args{Count: capwire.Ptr[float64](3), Verbose: capwire.Ptr(true), Name: capwire.Ptr("x")}
	fmt.Println(*a.Count, *a.Verbose, *a.Name)
	// Output: 3 true x
}
