package mcpwire

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/capbridge/capbridge/internal/jsonlex"
	"github.com/capbridge/capbridge/internal/mcpproto"
	"github.com/capbridge/capbridge/internal/truncate"
)

// handleLine acts on one line of the server's stdout, as the holder of
// the reading side: a response settles its call, a server request is
// answered, a notification is acted on; under 2025-03-26 a batch is each
// of its elements in turn. A line read from the answer to one request
// (an HTTP POST's, or its resumption's) names that request's id in only,
// and a response there to any other request is stray: a server or proxy
// that misroutes answers must not settle another call in flight, maybe
// another program's, with them. only is 0 where any response may come.
func (c *Client) handleLine(line []byte, m *mcpproto.Message, only int64) {
	if c.batch.Load() {
		if i := jsonlex.SkipSpace(line, 0); i < len(line) && line[i] == '[' {
			elems, err := mcpproto.SplitBatch(line)
			if err != nil {
				c.stray(line, err)
				return
			}
			for _, e := range elems {
				c.handleMessage(e, m, only)
			}
			return
		}
	}
	c.handleMessage(line, m, only)
}

// errOtherAnswer is why a response on another request's answer is stray.
var errOtherAnswer = errors.New("mcpwire: a response to another request, on this request's answer")

func (c *Client) handleMessage(line []byte, m *mcpproto.Message, only int64) {
	if err := mcpproto.DecodeMessage(line, m); err != nil {
		// A broken line whose id we can read fails that one call: a
		// faulty envelope (e.g. both "result" and "error") has its id
		// decoded; a line that is not valid JSON at all (NaN, too deep,
		// a late syntax error) has it peeked. The connection survives.
		id, ok := m.ID.Int, m.HasID && m.ID.IsInt
		var mf *mcpproto.MessageFault
		if !ok && errors.As(err, &mf) && !mf.JSON {
			id, ok = mcpproto.PeekResponseID(line)
		}
		if ok && (only == 0 || id == only) && c.failCall(id, line, err) {
			return
		}
		c.stray(line, err)
		return
	}
	switch m.Kind {
	case mcpproto.KindResponse:
		if only != 0 && (!m.ID.IsInt || m.ID.Int != only) {
			c.stray(line, errOtherAnswer)
			return
		}
		c.handleResponse(m)
	case mcpproto.KindRequest:
		c.handleServerRequest(m)
	case mcpproto.KindNotification:
		c.handleNotification(m)
	}
}

func (c *Client) handleResponse(m *mcpproto.Message) {
	var res jsonlex.Value
	var err error
	if m.Error != nil {
		e := *m.Error
		e.Data = bytes.Clone(e.Data)
		err = &e
	} else {
		if m.ID.IsInt && c.isToolCall(m.ID.Int) {
			// Its texts will be cut from this one copy rather than
			// copied again (mcpproto.DecodeCallToolResultValue), in
			// memory its caller may give back (CallToolResult.Release).
			res = m.Result.Lease()
		} else {
			res = m.Result.Clone()
		}
	}
	if c.modernResponse(m) {
		return
	}
	if m.ID.IsInt && c.settle(m.ID.Int, res, err) {
		return
	}
	if m.ID.IsInt && c.answerAbandoned(m.ID.Int) {
		c.log.Debug().Int64("id", m.ID.Int).Msg("mcpwire: late response for an abandoned call")
		return
	}
	// Unknown, already settled (a duplicate, a late reply for a call
	// no longer tracked) or not an id we mint (a string id): ignored,
	// as the cancellation spec asks.
	c.log.Debug().Bytes("id", m.ID.Raw).Msg("mcpwire: response for no call in flight dropped")
}

// handleServerRequest answers ping with {} and everything else with
// -32601: the client declared no capabilities, so sampling, roots,
// elicitation and the rest are refused, each one logged.
func (c *Client) handleServerRequest(m *mcpproto.Message) {
	if c.modernRequest(m) {
		return
	}
	method := string(m.Method)
	var line []byte
	if method == "ping" {
		line = appendResult(nil, m.ID.Raw, []byte("{}"))
		c.log.Debug().Msg("mcpwire: server ping answered")
	} else {
		line = appendErrorResponse(nil, m.ID.Raw, -32601, "Method not found")
		c.log.Warn().Str("method", preview(m.Method)).Msg("mcpwire: server request refused (-32601)")
	}
	c.car.sendAside(outbound{}, line)
}

func (c *Client) handleNotification(m *mcpproto.Message) {
	if c.modernNotification(m) {
		return
	}
	switch string(m.Method) {
	case "notifications/progress":
		c.progress(m.Params)
	case "notifications/tools/list_changed":
		select {
		case c.toolsChanged <- struct{}{}:
		default:
		}
		c.log.Info().Msg("mcpwire: server tools changed")
	case "notifications/message":
		c.log.Info().Str("data", preview(m.Params)).Msg("mcpwire: server log message")
	default:
		c.log.Debug().Str("method", preview(m.Method)).Msg("mcpwire: notification dropped")
	}
}

// errStopWalk ends a jsonlex.EachMember walk once the member sought is
// read; it never leaves progress.
var errStopWalk = errors.New("mcpwire: stop")

// progress extends the idle deadline of the call whose token (= id) the
// notification names, never past the call's hard maximum.
func (c *Client) progress(params []byte) {
	if params == nil || params[0] != '{' {
		return
	}
	var token int64
	ok := false
	_ = jsonlex.EachMember(params, func(key, v []byte) error {
		if jsonlex.KeyIs(key, "progressToken") {
			if n, err := strconv.ParseInt(string(v), 10, 64); err == nil {
				token, ok = n, true
			}
			return errStopWalk
		}
		return nil
	})
	if !ok {
		return
	}
	c.mu.Lock()
	if cl := c.calls[token]; cl != nil {
		d := cl.idle
		if rem := time.Until(cl.hard); rem < d {
			d = rem
		}
		if d > 0 {
			cl.ExpireLocked(time.Now().Add(d), cl.idle/4)
			if cl.timer != nil {
				cl.timer.Reset(d)
			}
		}
	}
	c.mu.Unlock()
}

// badLine handles a line the framer refused (over the cap, or not
// UTF-8): it fails the call it answers when its id can be peeked, and is
// stray output otherwise. Of a line over the cap only its prefix is
// here, and only those bytes count against MaxStrayBytes: the rest was
// skipped unread, so one long line costs a stray line, not the server.
func (c *Client) badLine(line []byte, ff *mcpproto.FramingFault) {
	if id, ok := mcpproto.PeekResponseID(line); ok && c.failCall(id, line, ff) {
		return
	}
	c.stray(line, ff)
}

// failCall fails call id, if it is in flight, with a
// *MalformedResultError for fault; the line is then accounted for, not
// stray output.
func (c *Client) failCall(id int64, line []byte, fault error) bool {
	err := malformed(id, fault)
	if !c.settle(id, jsonlex.Value{}, err) {
		return false
	}
	c.log.Warn().Err(err).Str("line", preview(line)).Msg("mcpwire: malformed response failed its call")
	return true
}

// stray counts and logs a line that is not a usable JSON-RPC message;
// past the bounds the server is declared dead.
func (c *Client) stray(line []byte, why error) {
	lines := c.strayLines.Add(1)
	n := c.strayBytes.Add(int64(len(line)))
	c.log.Warn().Err(why).Str("line", preview(line)).Msg("mcpwire: unusable line on server stdout skipped")
	if lines > int64(c.cfg.MaxStrayLines) || n > int64(c.cfg.MaxStrayBytes) {
		c.die(fmt.Errorf("%w: %d lines, %d bytes", ErrNoise, lines, n))
	}
}

// preview renders at most strayPreview bytes of b as valid UTF-8, "…"
// marking a cut. Only the bytes it may keep are copied.
func preview(b []byte) string {
	return truncate.Ellipsis(string(b[:min(len(b), strayPreview+utf8.UTFMax)]), strayPreview)
}

// previewString is preview of a string the server chose (its name, its
// version, an error's message), where a log repeats it.
func previewString(s string) string { return truncate.Ellipsis(s, strayPreview) }
