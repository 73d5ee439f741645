// Package jsonout encodes JSON as capbridge writes it for programs and
// files rather than web pages: without encoding/json's HTML escaping.
package jsonout

import (
	"bytes"
	"encoding/json"
)

// Marshal is json.Marshal without HTML escaping: "<", ">" and "&" stay
// one byte each, where json.Marshal writes six ("\u003c"), which makes a
// reply quoting markup up to six times its size and a file harder to
// read. Map keys are sorted, as json.Marshal sorts them.
func Marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
