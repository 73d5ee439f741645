package capwire

import (
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/capbridge/capbridge/internal/msgpk"
)

// Keys are written in one fixed order per type and every value in its
// shortest form, so equal messages encode to equal bytes.

// AppendFrame appends m as a whole frame (length prefix and payload) to
// dst. A payload longer than maxFrame bytes (0 means bound.MaxMessage) is an
// error satisfying errors.Is(err, ErrFrameTooLarge), and dst is returned
// unchanged; the bridge answers such a result with result_too_large. The
// bridge's server and control plane encode with it.
func AppendFrame(dst []byte, m Message, maxFrame int) ([]byte, error) {
	maxFrame = frameLimit(maxFrame)
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	out, err := m.appendBody(dst)
	if err != nil {
		return dst[:start], err
	}
	return finishFrame(out, start, maxFrame, m.Type())
}

// AppendFramed appends one frame to dst whose payload body appends: the
// length prefix is reserved, body appends the payload after it, and the
// prefix is filled in, so no caller builds a header by hand. It is how
// protocols that share capwire's framing but not its envelopes (the
// control plane) write frames. A payload over maxFrame (0 means
// bound.MaxMessage) or an error from body leaves dst as it was.
func AppendFramed(dst []byte, maxFrame int, body func([]byte) ([]byte, error)) ([]byte, error) {
	start := len(dst)
	out, err := body(append(dst, 0, 0, 0, 0))
	if err != nil {
		return dst[:start], err
	}
	return finishFrame(out, start, frameLimit(maxFrame), "frame")
}

// finishFrame writes the length prefix reserved at out[start:start+4].
func finishFrame(out []byte, start, maxFrame int, typ string) ([]byte, error) {
	n := len(out) - start - 4
	if n > maxFrame {
		return out[:start], fmt.Errorf("capwire: encoding %s: %w: payload %d bytes, limit %d", typ, ErrFrameTooLarge, n, maxFrame)
	}
	out[start] = byte(n >> 24)
	out[start+1] = byte(n >> 16)
	out[start+2] = byte(n >> 8)
	out[start+3] = byte(n)
	return out, nil
}

func encodeErr(typ, field, msg string) error {
	return fmt.Errorf("capwire: encoding %s: %s: %s", typ, field, msg)
}

func checkStr(typ, field, s string) error {
	if !utf8.ValidString(s) {
		return encodeErr(typ, field, "invalid UTF-8")
	}
	return nil
}

func (m *HelloMsg) appendBody(dst []byte) ([]byte, error) {
	if err := checkStr(typeHello, "token", m.Token); err != nil {
		return dst, err
	}
	dst = appendMapHeader(dst, 3)
	dst = appendStr(appendStr(dst, "t"), typeHello)
	dst = appendUint(appendStr(dst, "v"), m.V)
	dst = appendStr(appendStr(dst, "token"), m.Token)
	return dst, nil
}

func (m *WelcomeMsg) appendBody(dst []byte) ([]byte, error) {
	for _, s := range m.Servers {
		if err := checkStr(typeWelcome, "servers", s); err != nil {
			return dst, err
		}
	}
	dst = appendMapHeader(dst, 3)
	dst = appendStr(appendStr(dst, "t"), typeWelcome)
	dst = appendUint(appendStr(dst, "v"), m.V)
	dst = appendArrayHeader(appendStr(dst, "servers"), len(m.Servers))
	for _, s := range m.Servers {
		dst = appendStr(dst, s)
	}
	return dst, nil
}

// appendCallHead writes a call up to and including the "args" key; the
// args map follows. Client.Call encodes args straight after it into the
// frame buffer.
func appendCallHead(dst []byte, id uint64, capName, op string, timeoutMS uint64, traceparent string) ([]byte, error) {
	if capName == "" || op == "" {
		return dst, encodeErr(typeCall, "cap/op", "must not be empty")
	}
	if err := checkStr(typeCall, "cap", capName); err != nil {
		return dst, err
	}
	if err := checkStr(typeCall, "op", op); err != nil {
		return dst, err
	}
	if err := checkStr(typeCall, "traceparent", traceparent); err != nil {
		return dst, err
	}
	n := 5
	if timeoutMS != 0 {
		n++
	}
	if traceparent != "" {
		n++
	}
	dst = appendMapHeader(dst, n)
	dst = appendStr(appendStr(dst, "t"), typeCall)
	dst = appendUint(appendStr(dst, "id"), id)
	dst = appendStr(appendStr(dst, "cap"), capName)
	dst = appendStr(appendStr(dst, "op"), op)
	if timeoutMS != 0 {
		dst = appendUint(appendStr(dst, "timeout_ms"), timeoutMS)
	}
	if traceparent != "" {
		dst = appendStr(appendStr(dst, "traceparent"), traceparent)
	}
	return appendStr(dst, "args"), nil
}

// checkArgs is the encoder's check that args is one well-formed map.
func checkArgs(args []byte) error {
	h, err := msgpk.Check(args)
	if err != nil {
		return encodeErr(typeCall, "args", cause(err).Error())
	}
	if h.Kind != msgpk.Map {
		return encodeErr(typeCall, "args", "not a map")
	}
	return nil
}

func (m *CallMsg) appendBody(dst []byte) ([]byte, error) {
	if err := checkArgs(m.Args); err != nil {
		return dst, err
	}
	out, err := appendCallHead(dst, m.ID, m.Cap, m.Op, m.TimeoutMS, m.Traceparent)
	if err != nil {
		return dst, err
	}
	return append(out, m.Args...), nil
}

func (m *CancelMsg) appendBody(dst []byte) ([]byte, error) {
	dst = appendMapHeader(dst, 2)
	dst = appendStr(appendStr(dst, "t"), typeCancel)
	return appendUint(appendStr(dst, "id"), m.ID), nil
}

func (m *ResultMsg) appendBody(dst []byte) ([]byte, error) {
	r := &m.Result
	if len(r.Structured) > 0 {
		if _, err := msgpk.Check(r.Structured); err != nil {
			return dst, encodeErr(typeResult, "structured", cause(err).Error())
		}
	}
	for i := range r.Content {
		blk := &r.Content[i]
		switch {
		case blk.Type == BlockText:
			if err := checkStr(typeResult, "content text", blk.Text); err != nil {
				return dst, err
			}
		case blk.Type == BlockOther && blk.Kind != "":
			for _, f := range [...]struct{ name, s string }{{"content kind", blk.Kind}, {"content text", blk.Text}, {"content mime", blk.MIME}, {"content uri", blk.URI}, {"content name", blk.Name}} {
				if err := checkStr(typeResult, f.name, f.s); err != nil {
					return dst, err
				}
			}
			if blk.Size < 0 {
				return dst, encodeErr(typeResult, "content", fmt.Sprintf("block %d: negative size", i))
			}
		default:
			return dst, encodeErr(typeResult, "content", fmt.Sprintf("block %d: want type %q or %q with a kind", i, BlockText, BlockOther))
		}
	}
	dst = appendMapHeader(dst, 6)
	dst = appendStr(appendStr(dst, "t"), typeResult)
	dst = appendUint(appendStr(dst, "id"), m.ID)
	dst = appendBool(appendStr(dst, "is_error"), r.IsError)
	dst = appendArrayHeader(appendStr(dst, "content"), len(r.Content))
	for i := range r.Content {
		dst = appendBlock(dst, &r.Content[i])
	}
	dst = appendStr(dst, "structured")
	if len(r.Structured) > 0 {
		dst = append(dst, r.Structured...)
	} else {
		dst = append(dst, 0xc0)
	}
	dst = appendBool(appendStr(dst, "truncated"), r.Truncated)
	return dst, nil
}

// appendBlock writes one content block: a text block's type and text; an
// other block's type and kind, then only the fields it has (older clients
// ignore them, docs/capwire.md "Results and content blocks").
func appendBlock(dst []byte, blk *Block) []byte {
	if blk.Type == BlockText {
		dst = appendMapHeader(dst, 2)
		dst = appendStr(appendStr(dst, "type"), blk.Type)
		return appendStr(appendStr(dst, "text"), blk.Text)
	}
	n := 2
	for _, s := range [...]string{blk.Text, blk.MIME, blk.URI, blk.Name} {
		if s != "" {
			n++
		}
	}
	if blk.Data != nil {
		n++
	}
	if blk.Size > 0 {
		n++
	}
	dst = appendMapHeader(dst, n)
	dst = appendStr(appendStr(dst, "type"), blk.Type)
	dst = appendStr(appendStr(dst, "kind"), blk.Kind)
	for _, f := range [...]struct{ key, s string }{{"text", blk.Text}, {"mime", blk.MIME}, {"uri", blk.URI}, {"name", blk.Name}} {
		if f.s != "" {
			dst = appendStr(appendStr(dst, f.key), f.s)
		}
	}
	if blk.Data != nil {
		dst = appendBin(appendStr(dst, "data"), blk.Data)
	}
	if blk.Size > 0 {
		dst = appendUint(appendStr(dst, "size"), uint64(blk.Size))
	}
	return dst
}

func (m *DeniedMsg) appendBody(dst []byte) ([]byte, error) {
	d := &m.Denial
	if !isDenialCode(d.Code) {
		return dst, encodeErr(typeDenied, "code", strconv.Quote(d.Code)+" is not a denial code")
	}
	if err := checkStr(typeDenied, "message", d.Message); err != nil {
		return dst, err
	}
	if err := checkStr(typeDenied, "path", d.Path); err != nil {
		return dst, err
	}
	if err := checkStr(typeDenied, "quota", d.Quota); err != nil {
		return dst, err
	}
	// rpc_code is written for server_error always (a JSON-RPC code may be
	// 0) and for other codes only when set.
	withRPC := d.Code == CodeServerError || d.RPCCode != 0
	n := 3
	if !m.NoID {
		n++
	}
	if d.Path != "" {
		n++
	}
	if withRPC {
		n++
	}
	if d.Quota != "" {
		n++
	}
	if d.RetryMS != 0 {
		n++
	}
	dst = appendMapHeader(dst, n)
	dst = appendStr(appendStr(dst, "t"), typeDenied)
	if !m.NoID {
		dst = appendUint(appendStr(dst, "id"), m.ID)
	}
	dst = appendStr(appendStr(dst, "code"), d.Code)
	dst = appendStr(appendStr(dst, "message"), d.Message)
	if d.Path != "" {
		dst = appendStr(appendStr(dst, "path"), d.Path)
	}
	if withRPC {
		dst = appendInt(appendStr(dst, "rpc_code"), int64(d.RPCCode))
	}
	if d.Quota != "" {
		dst = appendStr(appendStr(dst, "quota"), d.Quota)
	}
	if d.RetryMS != 0 {
		dst = appendUint(appendStr(dst, "retry_ms"), d.RetryMS)
	}
	return dst, nil
}

func (m *FatalMsg) appendBody(dst []byte) ([]byte, error) {
	if !IsFatalCode(m.Code) {
		return dst, encodeErr(typeFatal, "code", strconv.Quote(m.Code)+" is not a fatal code")
	}
	if err := checkStr(typeFatal, "message", m.Message); err != nil {
		return dst, err
	}
	dst = appendMapHeader(dst, 3)
	dst = appendStr(appendStr(dst, "t"), typeFatal)
	dst = appendStr(appendStr(dst, "code"), m.Code)
	dst = appendStr(appendStr(dst, "message"), m.Message)
	return dst, nil
}
