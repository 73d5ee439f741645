package interchange

import (
	"strconv"
	"strings"

	"github.com/capbridge/capbridge/internal/pointer"
)

// FaultKind says why a conversion refused its input. The set is closed:
// the constants below are every kind a conversion returns, and the package
// doc says which direction produces which. Reach it with errors.As:
//
//	var f *interchange.Fault
//	if errors.As(err, &f) && f.Kind == interchange.FaultDuplicateKey { … }
type FaultKind uint8

// The fault kinds. Their String forms are stable identifiers, suitable for
// a denial code or a log field; Fault's message text is not.
const (
	// FaultTruncated: the input ended inside a value.
	FaultTruncated FaultKind = iota + 1
	// FaultTrailing: bytes follow the one top-level value.
	FaultTrailing
	// FaultSyntax: a byte that cannot appear where it does (JSON grammar,
	// or the never-used MessagePack byte 0xc1).
	FaultSyntax
	// FaultInvalidUTF8: a string (or key) is not valid UTF-8.
	FaultInvalidUTF8
	// FaultLoneSurrogate: a JSON \u escape names half a surrogate pair.
	FaultLoneSurrogate
	// FaultBinary: a MessagePack bin value, which has no JSON form.
	FaultBinary
	// FaultExtension: a MessagePack ext value (timestamps included).
	FaultExtension
	// FaultNonStringKey: a MessagePack map key that is not a str.
	FaultNonStringKey
	// FaultDuplicateKey: an object or map names the same key twice.
	FaultDuplicateKey
	// FaultNonFinite: a MessagePack float that is NaN or ±Inf.
	FaultNonFinite
	// FaultIntegerRange: a JSON integer outside [-2^63, 2^64-1].
	FaultIntegerRange
	// FaultFloatOverflow: a JSON number with a fraction or exponent whose
	// magnitude rounds to infinity as a float64.
	FaultFloatOverflow
	// FaultDepth: arrays and objects nest deeper than MaxDepth.
	FaultDepth
	// FaultTooLarge: the output would exceed Limits.MaxOutput.
	FaultTooLarge
)

var kindNames = [...]string{
	FaultTruncated:     "truncated",
	FaultTrailing:      "trailing_bytes",
	FaultSyntax:        "syntax",
	FaultInvalidUTF8:   "invalid_utf8",
	FaultLoneSurrogate: "lone_surrogate",
	FaultBinary:        "binary",
	FaultExtension:     "extension",
	FaultNonStringKey:  "non_string_key",
	FaultDuplicateKey:  "duplicate_key",
	FaultNonFinite:     "non_finite",
	FaultIntegerRange:  "integer_range",
	FaultFloatOverflow: "float_overflow",
	FaultDepth:         "depth",
	FaultTooLarge:      "too_large",
}

var kindTexts = [...]string{
	FaultTruncated:     "input ends inside a value",
	FaultTrailing:      "bytes after the value",
	FaultSyntax:        "syntax error",
	FaultInvalidUTF8:   "string is not valid UTF-8",
	FaultLoneSurrogate: "lone UTF-16 surrogate",
	FaultBinary:        "binary value has no JSON form",
	FaultExtension:     "extension value has no JSON form",
	FaultNonStringKey:  "map key is not a string",
	FaultDuplicateKey:  "duplicate key",
	FaultNonFinite:     "NaN or infinity has no JSON form",
	FaultIntegerRange:  "integer outside [-2^63, 2^64-1]",
	FaultFloatOverflow: "number overflows float64",
	FaultDepth:         "nesting deeper than MaxDepth",
	FaultTooLarge:      "output exceeds the limit",
}

// String returns the kind's stable identifier, e.g. "duplicate_key".
func (k FaultKind) String() string {
	if int(k) < len(kindNames) && kindNames[k] != "" {
		return kindNames[k]
	}
	return "FaultKind(" + strconv.Itoa(int(k)) + ")"
}

// Fault is the error every conversion returns. It names what went wrong,
// where in the document (Path) and where in the input (Offset).
type Fault struct {
	Kind FaultKind
	// Path is the RFC 6901 JSON Pointer of the offending value ("" is the
	// whole document; "/items/3/name" with "~" and "/" in keys written as
	// "~0" and "~1"). For a fault in a map key that cannot be named (a
	// non-string or invalid key) it is the path of the map; for a
	// duplicate key it is the path of the second occurrence.
	Path string
	// Offset is the byte offset in the input where the fault was found:
	// the first byte of the offending value, the bad byte inside a string,
	// or len(input) for FaultTruncated. The package doc lists it per kind.
	Offset int

	fromJSON bool
	// rev holds Path's reference tokens, innermost first, as the
	// conversion unwinds; finish joins them. Keeping this off the success
	// path is why the recursion returns *Fault rather than tracking a path.
	rev []string
}

func (f *Fault) Error() string {
	in := "msgpack"
	if f.fromJSON {
		in = "json"
	}
	text := f.Kind.String()
	if int(f.Kind) < len(kindTexts) && kindTexts[f.Kind] != "" {
		text = kindTexts[f.Kind]
	}
	return "interchange: " + in + ": " + text + " at " + strconv.Quote(f.Path) +
		" (byte " + strconv.Itoa(f.Offset) + ")"
}

func newFault(k FaultKind, off int) *Fault {
	return &Fault{Kind: k, Offset: off}
}

// index prepends an array index to the path.
func (f *Fault) index(i int) *Fault {
	f.rev = append(f.rev, strconv.Itoa(i))
	return f
}

// key prepends an object member name (valid UTF-8) to the path.
func (f *Fault) key(k []byte) *Fault {
	f.rev = append(f.rev, pointer.Token(string(k)))
	return f
}

func (f *Fault) finish(fromJSON bool) *Fault {
	f.fromJSON = fromJSON
	var b strings.Builder
	for i := len(f.rev) - 1; i >= 0; i-- {
		b.WriteByte('/')
		b.WriteString(f.rev[i])
	}
	f.Path = b.String()
	f.rev = nil
	return f
}
