package httpcred

import (
	"encoding/base64"
	"reflect"
	"testing"
)

func TestParts(t *testing.T) {
	basic := func(s string) string { return "Basic " + base64.StdEncoding.EncodeToString([]byte(s)) }
	for _, tc := range []struct {
		v    string
		want []Part
	}{
		{"", nil},
		{"sk-live-1234", []Part{{"", "sk-live-1234"}}},
		{"Bearer tok-abc", []Part{{"", "Bearer tok-abc"}, {"", "tok-abc"}}},
		{"Bearer  tok-abc ", []Part{{"", "Bearer  tok-abc "}, {"", "tok-abc"}}},
		{"Bearer ", []Part{{"", "Bearer "}}},
		{basic("client:s3cret"), []Part{{"", basic("client:s3cret")}, {"", basic("client:s3cret")[6:]}, {"password", "s3cret"}}},
		{basic("client%3Aid:pa%2Bss"), []Part{{"", basic("client%3Aid:pa%2Bss")}, {"", basic("client%3Aid:pa%2Bss")[6:]}, {"password", "pa%2Bss"}, {"password", "pa+ss"}}},
		{basic("apikey-only"), []Part{{"", basic("apikey-only")}, {"", basic("apikey-only")[6:]}, {"user", "apikey-only"}}},
		{basic(":"), []Part{{"", basic(":")}, {"", basic(":")[6:]}}},
		{"basic not-base64!", []Part{{"", "basic not-base64!"}, {"", "not-base64!"}}},
	} {
		if got := Parts(tc.v); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Parts(%q) = %q, want %q", tc.v, got, tc.want)
		}
	}
}
