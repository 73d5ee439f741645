package capwire

import (
	"math"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/capbridge/capbridge/internal/bound"
	"github.com/capbridge/capbridge/internal/msgpk"
	"github.com/capbridge/capbridge/internal/pointer"
)

// Field indices of every key any v1 envelope uses. Decode scans a frame
// once, noting where each known key's value lies; unknown keys are skipped
// (checked for well-formedness, then ignored: docs/capwire.md,
// "Versioning").
const (
	fT = iota
	fV
	fToken
	fServers
	fID
	fCap
	fOp
	fArgs
	fTimeout
	fIsError
	fContent
	fStructured
	fTruncated
	fCode
	fMessage
	fPath
	fRPCCode
	fTraceparent
	fQuota
	fRetryMS
	nFields
)

var fieldNames = [nFields]string{
	"t", "v", "token", "servers", "id", "cap", "op", "args", "timeout_ms",
	"is_error", "content", "structured", "truncated", "code", "message", "path", "rpc_code",
	"traceparent", "quota", "retry_ms",
}

func fieldOf(key []byte) int {
	// A switch on string(key) compiles to comparisons without allocating.
	switch string(key) {
	case "t":
		return fT
	case "v":
		return fV
	case "token":
		return fToken
	case "servers":
		return fServers
	case "id":
		return fID
	case "cap":
		return fCap
	case "op":
		return fOp
	case "args":
		return fArgs
	case "timeout_ms":
		return fTimeout
	case "is_error":
		return fIsError
	case "content":
		return fContent
	case "structured":
		return fStructured
	case "truncated":
		return fTruncated
	case "code":
		return fCode
	case "message":
		return fMessage
	case "path":
		return fPath
	case "rpc_code":
		return fRPCCode
	case "traceparent":
		return fTraceparent
	case "quota":
		return fQuota
	case "retry_ms":
		return fRetryMS
	}
	return -1
}

// envelope is Decode's working state for one frame.
type envelope struct {
	b    []byte
	seen uint32
	at   [nFields]int // where each seen field's value starts
	end  [nFields]int // and ends

	// early is the first semantic fault found while scanning (duplicate
	// key, non-string key, nesting too deep), reported once the type and
	// id are known.
	early *WireError

	typ   string
	code  string
	fatal bool
	id    uint64
	hasID bool
}

// Decode decodes one frame's payload (without the length prefix) into the
// envelope it holds. It is total: any input gives a Message or a
// *WireError. The result may alias b (CallMsg.Args, Result.Structured); b
// must not be modified while it is in use.
//
// Faults, as the spec defines them: a payload that is not exactly one
// well-formed MessagePack map is a fatal bad_frame; any fault in a hello is
// a fatal bad_hello; any other fault (missing or unknown "t", wrong field
// types, a value nested deeper than bound.MaxDepth, invalid UTF-8 in an envelope
// string, a duplicated key) is a non-fatal bad_request that carries the
// frame's id when it had a usable one.
func Decode(b []byte) (Message, error) {
	return DecodeInto(b, nil)
}

// DecodeInto is Decode, except that a call is decoded into *call (which
// it returns) rather than into a new CallMsg, so that a reader keeping
// each call in a struct of its own allocates once per call. *call is
// written only when b holds a valid call; nil call means a new one.
func DecodeInto(b []byte, call *CallMsg) (Message, error) {
	e := envelope{b: b}
	if err := e.scan(); err != nil {
		return nil, err
	}
	if err := e.classify(); err != nil {
		return nil, err
	}
	if e.early != nil {
		return nil, e.finish(e.early)
	}
	switch e.typ {
	case typeHello:
		return e.hello()
	case typeWelcome:
		return e.welcome()
	case typeCall:
		return e.call(call)
	case typeCancel:
		return e.cancel()
	case typeResult:
		return e.result()
	case typeDenied:
		return e.denied()
	case typeFatal:
		return e.fatalMsg()
	}
	return nil, e.fail(fT, "", "unknown envelope type "+strconv.Quote(e.typ))
}

// typeName returns t as a string, without allocating for the v1 types
// (the hot path decodes a "call" per tool call); "" if t is not UTF-8.
func typeName(t []byte) string {
	switch string(t) {
	case typeHello:
		return typeHello
	case typeWelcome:
		return typeWelcome
	case typeCall:
		return typeCall
	case typeCancel:
		return typeCancel
	case typeResult:
		return typeResult
	case typeDenied:
		return typeDenied
	case typeFatal:
		return typeFatal
	}
	if !utf8.Valid(t) {
		return ""
	}
	return string(t)
}

func badFrame(off int, msg string, err error) *WireError {
	return &WireError{Code: CodeBadFrame, Fatal: true, Offset: off, Msg: msg, Err: cause(err)}
}

// scan walks the top-level map once, recording the span of each known key's
// value and checking every value's structure.
func (e *envelope) scan() error {
	b := e.b
	h, err := msgpk.ReadHead(b, 0)
	if err != nil {
		return badFrame(0, "frame is not MessagePack", err)
	}
	if h.Kind != msgpk.Map {
		return badFrame(0, "frame is not a map", nil)
	}
	if h.V*2 > uint64(len(b)-h.Off) {
		return badFrame(0, "map claims more entries than the frame holds", errShort)
	}
	i := h.Off
	for n := h.V; n > 0; n-- {
		kh, ok := msgpk.ReadFix(b, i)
		if !ok {
			if kh, err = msgpk.ReadHead(b, i); err != nil {
				return badFrame(i, "bad key", err)
			}
		}
		vat := kh.End()
		if kh.Kind != msgpk.Str {
			// Walk the key (it may be a container) to find its value.
			if vat, err = msgpk.Skip(b, i, 0); err != nil && err != msgpk.ErrTooDeep {
				return badFrame(i, "bad key", err)
			}
			e.note("", i, "envelope key is not a string")
		}
		key := b[kh.Off:kh.End()]
		end, err := msgpk.Skip(b, vat, 0)
		f := -1
		if kh.Kind == msgpk.Str {
			f = fieldOf(key)
		}
		switch {
		case err == msgpk.ErrTooDeep:
			e.note("/"+escape(key), vat, "value nests deeper than "+strconv.Itoa(bound.MaxDepth))
		case err != nil:
			return badFrame(vat, "bad value for key "+strconv.Quote(string(key)), err)
		}
		if f >= 0 {
			if e.seen&(1<<f) != 0 {
				e.note("/"+fieldNames[f], i, "duplicate key")
			}
			e.seen |= 1 << f
			e.at[f], e.end[f] = vat, end
		}
		i = end
	}
	if i != len(b) {
		return badFrame(i, strconv.Itoa(len(b)-i)+" bytes after the map", nil)
	}
	return nil
}

// note records the first semantic fault found by scan.
func (e *envelope) note(path string, off int, msg string) {
	if e.early == nil {
		e.early = &WireError{Path: path, Offset: off, Msg: msg}
	}
}

// escape encodes a key as an RFC 6901 reference token, for paths. A key
// that is not UTF-8 is named by its Go quoting, so the path stays valid
// text and still tells the bytes apart.
func escape(key []byte) string {
	s := string(key)
	if !utf8.ValidString(s) {
		s = strconv.Quote(s)
	}
	return pointer.Token(s)
}

// classify reads "t" and "id", which decide how every later fault is
// reported.
func (e *envelope) classify() error {
	e.code = CodeBadRequest
	if e.has(fT) {
		h, _ := msgpk.ReadHead(e.b, e.at[fT])
		if h.Kind == msgpk.Str {
			e.typ = typeName(e.b[h.Off:h.End()])
		}
	}
	if e.typ == typeHello {
		e.code, e.fatal = CodeBadHello, true
	}
	if e.has(fID) {
		if h, _ := msgpk.ReadHead(e.b, e.at[fID]); h.Kind == msgpk.Uint {
			e.id, e.hasID = h.V, true
		}
	}
	if !e.has(fT) {
		return e.fail(-1, "", `missing "t"`)
	}
	if e.typ == "" {
		return e.fail(fT, "", `"t" is not a non-empty UTF-8 string`)
	}
	return nil
}

func (e *envelope) has(f int) bool { return e.seen&(1<<f) != 0 }

// finish completes a fault with what classify learned.
func (e *envelope) finish(w *WireError) *WireError {
	w.Code, w.Fatal, w.Type = e.code, e.fatal, e.typ
	w.ID, w.HasID = e.id, e.hasID
	return w
}

// fail reports a fault at field f (or at the frame when f < 0), with sub
// appended to the field's path.
func (e *envelope) fail(f int, sub, msg string) error {
	w := &WireError{Offset: -1, Msg: msg}
	if f >= 0 {
		w.Path, w.Offset = "/"+fieldNames[f]+sub, e.at[f]
	}
	return e.finish(w)
}

func (e *envelope) require(f int) error {
	if !e.has(f) {
		return e.fail(-1, "", "missing "+strconv.Quote(fieldNames[f]))
	}
	return nil
}

// present reports whether optional field f was given a non-nil value.
func (e *envelope) present(f int) bool {
	if !e.has(f) {
		return false
	}
	h, _ := msgpk.ReadHead(e.b, e.at[f])
	return h.Kind != msgpk.Nil
}

func (e *envelope) uint(f int) (uint64, error) {
	if err := e.require(f); err != nil {
		return 0, err
	}
	h, _ := msgpk.ReadHead(e.b, e.at[f])
	if h.Kind != msgpk.Uint {
		return 0, e.fail(f, "", "want an unsigned integer")
	}
	return h.V, nil
}

func (e *envelope) int(f int) (int, error) {
	h, _ := msgpk.ReadHead(e.b, e.at[f])
	switch {
	case h.Kind == msgpk.Uint && h.V <= math.MaxInt:
		return int(h.V), nil
	case h.Kind == msgpk.NegInt && int64(h.V) >= math.MinInt:
		return int(int64(h.V)), nil
	}
	return 0, e.fail(f, "", "want an integer")
}

func (e *envelope) bool(f int) (bool, error) {
	if err := e.require(f); err != nil {
		return false, err
	}
	h, _ := msgpk.ReadHead(e.b, e.at[f])
	switch h.Kind {
	case msgpk.True:
		return true, nil
	case msgpk.False:
		return false, nil
	}
	return false, e.fail(f, "", "want a boolean")
}

func (e *envelope) str(f int) (string, error) {
	if err := e.require(f); err != nil {
		return "", err
	}
	return e.strAt(e.at[f], f, "")
}

// strAt decodes the string at b[i], reporting faults at field f + sub.
func (e *envelope) strAt(i, f int, sub string) (string, error) {
	s, fault := e.strOrFault(i)
	if fault != "" {
		return "", e.fail(f, sub, fault)
	}
	return s, nil
}

// strOrFault decodes the string at b[i], or says what is wrong with it,
// for callers that build the fault's path only when there is one.
func (e *envelope) strOrFault(i int) (string, string) {
	h, _ := msgpk.ReadHead(e.b, i)
	if h.Kind != msgpk.Str {
		return "", "want a string"
	}
	s := e.b[h.Off:h.End()]
	if !utf8.Valid(s) {
		return "", "invalid UTF-8"
	}
	return string(s), ""
}

// nonEmpty is str for fields that must not be "".
func (e *envelope) nonEmpty(f int) (string, error) {
	s, err := e.str(f)
	if err == nil && s == "" {
		err = e.fail(f, "", "must not be empty")
	}
	return s, err
}

// optStr is a string field that may be absent or nil ("" then).
func (e *envelope) optStr(f int) (string, error) {
	if !e.present(f) {
		return "", nil
	}
	return e.str(f)
}

// raw is field f's bytes, capacity clipped so an append cannot reach into
// the rest of the frame.
func (e *envelope) raw(f int) []byte { return e.b[e.at[f]:e.end[f]:e.end[f]] }

func (e *envelope) hello() (Message, error) {
	v, err := e.uint(fV)
	if err != nil {
		return nil, err
	}
	tok, err := e.str(fToken)
	if err != nil {
		return nil, err
	}
	return &HelloMsg{V: v, Token: tok}, nil
}

func (e *envelope) welcome() (Message, error) {
	v, err := e.uint(fV)
	if err != nil {
		return nil, err
	}
	if err := e.require(fServers); err != nil {
		return nil, err
	}
	h, _ := msgpk.ReadHead(e.b, e.at[fServers])
	if h.Kind != msgpk.Array {
		return nil, e.fail(fServers, "", "want an array")
	}
	// The count was checked against the frame size by scan; cap the
	// allocation anyway so a hostile count costs no more than its bytes.
	servers := make([]string, 0, min(h.V, 64))
	i := h.Off
	for k := uint64(0); k < h.V; k++ {
		s, err := e.strAt(i, fServers, "/"+strconv.FormatUint(k, 10))
		if err != nil {
			return nil, err
		}
		servers = append(servers, s)
		i, _ = msgpk.Skip(e.b, i, 1)
	}
	return &WelcomeMsg{V: v, Servers: servers}, nil
}

func (e *envelope) call(into *CallMsg) (Message, error) {
	id, err := e.uint(fID)
	if err != nil {
		return nil, err
	}
	c := CallMsg{ID: id}
	if c.Cap, err = e.nonEmpty(fCap); err != nil {
		return nil, err
	}
	if c.Op, err = e.nonEmpty(fOp); err != nil {
		return nil, err
	}
	if err := e.require(fArgs); err != nil {
		return nil, err
	}
	if h, _ := msgpk.ReadHead(e.b, e.at[fArgs]); h.Kind != msgpk.Map {
		return nil, e.fail(fArgs, "", "want a map")
	}
	c.Args = e.raw(fArgs)
	if e.present(fTimeout) {
		if c.TimeoutMS, err = e.uint(fTimeout); err != nil {
			return nil, err
		}
	}
	if c.Traceparent, err = e.optStr(fTraceparent); err != nil {
		return nil, err
	}
	if into == nil {
		into = new(CallMsg)
	}
	*into = c
	return into, nil
}

func (e *envelope) cancel() (Message, error) {
	id, err := e.uint(fID)
	if err != nil {
		return nil, err
	}
	return &CancelMsg{ID: id}, nil
}

func (e *envelope) result() (Message, error) {
	id, err := e.uint(fID)
	if err != nil {
		return nil, err
	}
	// A result and its content, when it is one block (what most tools
	// answer), are one allocation.
	one := &struct {
		m   ResultMsg
		blk [1]Block
	}{m: ResultMsg{ID: id}}
	m := &one.m
	if m.Result.IsError, err = e.bool(fIsError); err != nil {
		return nil, err
	}
	if m.Result.Content, err = e.content(one.blk[:0]); err != nil {
		return nil, err
	}
	if e.present(fStructured) {
		m.Result.Structured = e.raw(fStructured)
	}
	if e.present(fTruncated) {
		if m.Result.Truncated, err = e.bool(fTruncated); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// content decodes the result's blocks, into dst when they fit. A block of
// a type this version does not know is kept with only its Type
// (docs/capwire.md, "Versioning").
func (e *envelope) content(dst []Block) ([]Block, error) {
	if err := e.require(fContent); err != nil {
		return nil, err
	}
	b := e.b
	h, _ := msgpk.ReadHead(b, e.at[fContent])
	if h.Kind != msgpk.Array {
		return nil, e.fail(fContent, "", "want an array")
	}
	blocks := dst[:0]
	if h.V > uint64(cap(dst)) {
		blocks = make([]Block, 0, min(h.V, 16))
	}
	i := h.Off
	for k := uint64(0); k < h.V; k++ {
		bh, _ := msgpk.ReadHead(b, i)
		if bh.Kind != msgpk.Map {
			return nil, e.fail(fContent, blockPath(k, -1), "want a map")
		}
		var blk Block
		var seen [len(blockKeys)]bool
		j := bh.Off
		for p := uint64(0); p < bh.V; p++ {
			kh, _ := msgpk.ReadHead(b, j)
			vat := kh.End()
			if kh.Kind != msgpk.Str {
				return nil, e.fail(fContent, blockPath(k, -1), "block key is not a string")
			}
			if slot := slices.Index(blockKeys[:], string(b[kh.Off:kh.End()])); slot >= 0 {
				if seen[slot] {
					return nil, e.fail(fContent, blockPath(k, slot), "duplicate key")
				}
				seen[slot] = true
				if fault := e.blockField(&blk, slot, vat); fault != "" {
					return nil, e.fail(fContent, blockPath(k, slot), fault)
				}
			}
			// Structure and depth were checked by scan.
			j, _ = msgpk.Skip(b, vat, 2)
		}
		switch {
		case !seen[0] || blk.Type == "":
			return nil, e.fail(fContent, blockPath(k, -1), `block has no "type"`)
		case blk.Type == BlockText && !seen[1]:
			return nil, e.fail(fContent, blockPath(k, -1), `text block has no "text"`)
		case blk.Type == BlockOther && blk.Kind == "":
			return nil, e.fail(fContent, blockPath(k, -1), `other block has no "kind"`)
		case blk.Type == BlockText:
			// Kind is what a program switches on, for every block.
			blk = Block{Type: BlockText, Kind: KindText, Text: blk.Text}
		case blk.Type != BlockOther:
			blk = Block{Type: blk.Type} // a newer type: kept by its type alone
		}
		blocks = append(blocks, blk)
		i = j
	}
	return blocks, nil
}

// blockKeys are the content block's fields, by slot.
var blockKeys = [...]string{"type", "text", "kind", "mime", "uri", "name", "data", "size"}

// blockPath is the path under "content" of block k, or of its field
// for slot (-1: the block itself). Built only for a fault: a result
// that decodes pays for no path.
func blockPath(k uint64, slot int) string {
	p := "/" + strconv.FormatUint(k, 10)
	if slot >= 0 {
		p += "/" + blockKeys[slot]
	}
	return p
}

// blockField decodes the value at i into blk's field for slot, or says
// what is wrong with it.
func (e *envelope) blockField(blk *Block, slot, i int) string {
	switch blockKeys[slot] {
	case "data":
		h, _ := msgpk.ReadHead(e.b, i)
		if h.Kind != msgpk.Bin {
			return "want binary data"
		}
		blk.Data = e.b[h.Off:h.End():h.End()]
		return ""
	case "size":
		h, _ := msgpk.ReadHead(e.b, i)
		if h.Kind != msgpk.Uint || h.V > math.MaxInt64 {
			return "want an unsigned integer"
		}
		blk.Size = int64(h.V)
		return ""
	}
	if slot == 0 || slot == 2 {
		// A block's type and kind are nearly always one of a few
		// names, which need no string of their own.
		if h, _ := msgpk.ReadHead(e.b, i); h.Kind == msgpk.Str {
			if s := blockName(e.b[h.Off:h.End()]); s != "" {
				if slot == 0 {
					blk.Type = s
				} else {
					blk.Kind = s
				}
				return ""
			}
		}
	}
	s, fault := e.strOrFault(i)
	if fault == "" {
		*[...]*string{&blk.Type, &blk.Text, &blk.Kind, &blk.MIME, &blk.URI, &blk.Name}[slot] = s
	}
	return fault
}

// blockName returns the constant equal to b among the block types and
// kinds this version names, or "".
func blockName(b []byte) string {
	switch string(b) {
	case BlockText: // = KindText
		return BlockText
	case BlockOther:
		return BlockOther
	case KindImage:
		return KindImage
	case KindAudio:
		return KindAudio
	case KindResource:
		return KindResource
	case KindResourceLink:
		return KindResourceLink
	}
	return ""
}

func (e *envelope) denied() (Message, error) {
	m := &DeniedMsg{NoID: true}
	if e.present(fID) {
		id, err := e.uint(fID)
		if err != nil {
			return nil, err
		}
		m.ID, m.NoID = id, false
	}
	var err error
	d := &m.Denial
	if d.Code, err = e.nonEmpty(fCode); err != nil {
		return nil, err
	}
	if d.Message, err = e.optStr(fMessage); err != nil {
		return nil, err
	}
	if d.Path, err = e.optStr(fPath); err != nil {
		return nil, err
	}
	if e.present(fRPCCode) {
		if d.RPCCode, err = e.int(fRPCCode); err != nil {
			return nil, err
		}
	}
	if d.Quota, err = e.optStr(fQuota); err != nil {
		return nil, err
	}
	if e.present(fRetryMS) {
		if d.RetryMS, err = e.uint(fRetryMS); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (e *envelope) fatalMsg() (Message, error) {
	code, err := e.nonEmpty(fCode)
	if err != nil {
		return nil, err
	}
	msg, err := e.optStr(fMessage)
	if err != nil {
		return nil, err
	}
	return &FatalMsg{Code: code, Message: msg}, nil
}
