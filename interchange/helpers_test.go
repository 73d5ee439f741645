package interchange

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// hx decodes hex written with spaces for readability: "81 a1 61 01".
func hx(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatalf("bad hex %q: %v", s, err)
	}
	return b
}

// canon is a decoded value in a form both decoders can be compared in:
// nil, bool, string, *big.Int (every integer, whatever its width),
// float64 (float32 widened), []any of canon, map[string]any of canon.
type canon = any

// canonJSON decodes src as encoding/json does with UseNumber, and
// canonicalises numbers: text without "." or exponent is an integer (exact,
// as a big.Int), anything else is the float64 strconv rounds it to.
func canonJSON(src []byte) (canon, error) {
	d := json.NewDecoder(bytes.NewReader(src))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	return canonOf(v)
}

// canonMsgPack decodes src with the reference MessagePack library. Only
// call it on input this package accepted: the library allocates whatever
// a map header claims.
func canonMsgPack(src []byte) (canon, error) {
	var v any
	if err := msgpack.Unmarshal(src, &v); err != nil {
		return nil, err
	}
	return canonOf(v)
}

func canonOf(v any) (canon, error) {
	switch v := v.(type) {
	case nil, bool, string:
		return v, nil
	case json.Number:
		s := string(v)
		if strings.ContainsAny(s, ".eE") {
			f, err := strconv.ParseFloat(s, 64)
			if err != nil && math.IsInf(f, 0) {
				// Underflow is also an error, but its value (zero or
				// a subnormal) is what every reader uses.
				return nil, fmt.Errorf("number %q: %v", s, err)
			}
			return f, nil
		}
		i, ok := new(big.Int).SetString(s, 10)
		if !ok {
			return nil, fmt.Errorf("integer %q", s)
		}
		return i, nil
	case int8:
		return big.NewInt(int64(v)), nil
	case int16:
		return big.NewInt(int64(v)), nil
	case int32:
		return big.NewInt(int64(v)), nil
	case int64:
		return big.NewInt(v), nil
	case uint8:
		return new(big.Int).SetUint64(uint64(v)), nil
	case uint16:
		return new(big.Int).SetUint64(uint64(v)), nil
	case uint32:
		return new(big.Int).SetUint64(uint64(v)), nil
	case uint64:
		return new(big.Int).SetUint64(v), nil
	case float32:
		return float64(v), nil
	case float64:
		return v, nil
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			c, err := canonOf(e)
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			c, err := canonOf(e)
			if err != nil {
				return nil, err
			}
			out[k] = c
		}
		return out, nil
	}
	return nil, fmt.Errorf("unexpected decoded type %T", v)
}

// canonEqual compares canonical values; floats compare by bits, so -0 and
// 0 differ and NaN (which never converts) cannot hide.
func canonEqual(a, b canon) bool {
	switch a := a.(type) {
	case nil:
		return b == nil
	case bool:
		bb, ok := b.(bool)
		return ok && a == bb
	case string:
		bs, ok := b.(string)
		return ok && a == bs
	case *big.Int:
		bi, ok := b.(*big.Int)
		return ok && a.Cmp(bi) == 0
	case float64:
		bf, ok := b.(float64)
		return ok && math.Float64bits(a) == math.Float64bits(bf)
	case []any:
		bs, ok := b.([]any)
		if !ok || len(a) != len(bs) {
			return false
		}
		for i := range a {
			if !canonEqual(a[i], bs[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		bm, ok := b.(map[string]any)
		if !ok || len(a) != len(bm) {
			return false
		}
		for k, v := range a {
			w, ok := bm[k]
			if !ok || !canonEqual(v, w) {
				return false
			}
		}
		return true
	}
	return false
}

// checkFault asserts err is a *Fault (reachable with errors.As) of a
// documented kind with a well-formed path and an offset inside src.
func checkFault(t testing.TB, err error, src []byte) *Fault {
	t.Helper()
	f, ok := err.(*Fault)
	if !ok {
		t.Fatalf("error %v (%T) is not a *Fault", err, err)
	}
	if f.Kind < FaultTruncated || f.Kind > FaultTooLarge {
		t.Fatalf("undocumented kind %d", f.Kind)
	}
	if f.Offset < 0 || f.Offset > len(src) {
		t.Fatalf("offset %d outside input of %d bytes", f.Offset, len(src))
	}
	if f.Path != "" && f.Path[0] != '/' {
		t.Fatalf("path %q is not an RFC 6901 pointer", f.Path)
	}
	if !strings.HasPrefix(f.Error(), "interchange: ") {
		t.Fatalf("message %q lacks the package prefix", f.Error())
	}
	return f
}
