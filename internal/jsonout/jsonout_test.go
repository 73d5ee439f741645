package jsonout

import (
	"encoding/json"
	"math"
	"testing"
)

func TestMarshal(t *testing.T) {
	for _, tc := range []struct {
		v    any
		want string
	}{
		{map[string]any{"b": "<a&b>", "a": 1}, `{"a":1,"b":"<a&b>"}`},
		{"\u2028", `"\u2028"`}, // still escaped: JavaScript's line separators
		{[]int{1, 2}, `[1,2]`},
		{nil, `null`},
	} {
		got, err := Marshal(tc.v)
		if err != nil || string(got) != tc.want {
			t.Errorf("Marshal(%v) = %s, %v; want %s", tc.v, got, err, tc.want)
		}
		var back, orig any
		if err := json.Unmarshal(got, &back); err != nil {
			t.Errorf("%s does not decode: %v", got, err)
		}
		b, _ := json.Marshal(tc.v)
		_ = json.Unmarshal(b, &orig)
		if gotS, origS := mustJSON(back), mustJSON(orig); gotS != origS {
			t.Errorf("Marshal(%v) decodes to %s, json.Marshal's to %s", tc.v, gotS, origS)
		}
	}
	if _, err := Marshal(math.NaN()); err == nil {
		t.Error("NaN encoded")
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
