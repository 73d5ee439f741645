package interchange

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
)

// wideSeeds are objects past the linear duplicate search, one of them
// with a duplicate key, as JSON and as MessagePack, so the fuzzers start
// inside the hash-table path too.
func wideSeeds() (js, mp [][]byte) {
	keys := make([]string, smallObject+4)
	for i := range keys {
		keys[i] = "k" + strings.Repeat("~", i%3) + string(rune('a'+i))
	}
	for _, dup := range []bool{false, true} {
		if dup {
			keys[len(keys)-1] = keys[2]
		}
		doc, _ := objectJSON(keys, func(i int) string { return "[" + strings.Repeat("0,", i) + "0]" })
		js = append(js, []byte(doc))
		m := []byte{0xde, 0, byte(len(keys))}
		for _, k := range keys {
			m = append(append(append(m, 0xa0|byte(len(k))), k...), 0xc0)
		}
		mp = append(mp, m)
	}
	return js, mp
}

func mustHex(s string) []byte {
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		panic(err)
	}
	return b
}

// FuzzToJSON feeds MessagePack bytes (random bytes are far more often
// valid MessagePack than valid JSON, so this side explores structure
// best). Whatever converts must be valid JSON that encoding/json decodes
// to the value the reference MessagePack decoder sees, and must convert
// back to an equal value whose JSON is the same text. Whatever fails must
// fail with a well-formed *Fault and leave the caller's prefix alone.
func FuzzToJSON(f *testing.F) {
	for _, tc := range toJSONCases {
		f.Add(mustHex(tc.in))
	}
	for _, tc := range toJSONFaults {
		f.Add(mustHex(tc.in))
	}
	for _, tc := range toMsgPackCases {
		f.Add(mustHex(tc.want))
	}
	_, wide := wideSeeds()
	for _, mp := range wide {
		f.Add(mp)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		out, err := AppendJSON([]byte("pfx"), data)
		if err != nil {
			checkFault(t, err, data)
			if string(out) != "pfx" {
				t.Fatalf("failed conversion returned %q", out)
			}
			return
		}
		js := out[3:]
		if len(js) > 6*len(data) {
			t.Fatalf("%d bytes became %d, past the documented 6× bound", len(data), len(js))
		}
		if !json.Valid(js) {
			t.Fatalf("output is not JSON: %q", js)
		}
		// Safe only now: the input is known to hold every element its
		// headers claim, so the reference decoder cannot over-allocate.
		want, err := canonMsgPack(data)
		if err != nil {
			t.Fatalf("accepted % x, which the reference decoder refuses: %v", data, err)
		}
		got, err := canonJSON(js)
		if err != nil {
			t.Fatalf("encoding/json refuses our output %q: %v", js, err)
		}
		if !canonEqual(got, want) {
			t.Fatalf("% x → %s: value changed", data, js)
		}
		mp, err := ToMsgPack(js)
		if err != nil {
			t.Fatalf("%s does not convert back: %v", js, err)
		}
		back, err := canonMsgPack(mp)
		if err != nil || !canonEqual(back, want) {
			t.Fatalf("% x → %s → % x: round trip changed the value (%v)", data, js, mp, err)
		}
		js2, err := ToJSON(mp)
		if err != nil || !bytes.Equal(js2, js) {
			t.Fatalf("second conversion %s differs from first %s (%v)", js2, js, err)
		}
	})
}

// jsonOnlyRefusals are the documented reasons this package refuses a
// text encoding/json accepts.
var jsonOnlyRefusals = map[FaultKind]bool{
	FaultDuplicateKey:  true, // encoding/json keeps the last
	FaultIntegerRange:  true, // it would round to float64
	FaultFloatOverflow: true, // it reports a type error, or with UseNumber passes it on
	FaultDepth:         true, // its bound is 10000
	FaultLoneSurrogate: true, // it substitutes U+FFFD
	FaultInvalidUTF8:   true, // it substitutes U+FFFD
}

// FuzzToMsgPack is differential against encoding/json: whatever we accept
// json.Valid accepts and decodes (with json.Number, compared exactly) to
// the value our MessagePack holds; whatever it accepts and we refuse is
// one of the documented refusals.
func FuzzToMsgPack(f *testing.F) {
	for _, tc := range toMsgPackCases {
		f.Add([]byte(tc.in))
	}
	for _, tc := range toMsgPackFaults {
		f.Add([]byte(tc.in))
	}
	for _, tc := range toJSONCases {
		f.Add([]byte(tc.want))
	}
	wide, _ := wideSeeds()
	for _, js := range wide {
		f.Add(js)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		out, err := AppendMsgPack([]byte{0xee}, data)
		valid := json.Valid(data)
		if err != nil {
			fault := checkFault(t, err, data)
			if !bytes.Equal(out, []byte{0xee}) {
				t.Fatalf("failed conversion returned % x", out)
			}
			if valid && !jsonOnlyRefusals[fault.Kind] {
				t.Fatalf("encoding/json accepts %q, refused with undocumented %v", data, err)
			}
			return
		}
		if !valid {
			t.Fatalf("accepted %q, which is not JSON", data)
		}
		mp := out[1:]
		if len(mp) > 3*len(data) {
			t.Fatalf("%d bytes became %d, past the documented 3× bound", len(data), len(mp))
		}
		want, err := canonJSON(data)
		if err != nil {
			t.Fatalf("encoding/json refuses %q: %v", data, err)
		}
		got, err := canonMsgPack(mp)
		if err != nil {
			t.Fatalf("%q → % x: reference decoder: %v", data, mp, err)
		}
		if !canonEqual(got, want) {
			t.Fatalf("%q → % x: value differs from encoding/json's", data, mp)
		}
		js, err := ToJSON(mp)
		if err != nil {
			t.Fatalf("%q → % x does not convert back: %v", data, mp, err)
		}
		back, err := canonJSON(js)
		if err != nil || !canonEqual(back, want) {
			t.Fatalf("%q → %s: round trip changed the value (%v)", data, js, err)
		}
	})
}
