package interchange_test

import (
	"errors"
	"fmt"

	"github.com/capbridge/capbridge/interchange"
)

func ExampleAppendJSON() {
	// {"q":"go","n":[1,2.5]} as MessagePack.
	args := []byte{0x82, 0xa1, 'q', 0xa2, 'g', 'o', 0xa1, 'n', 0x92, 0x01,
		0xcb, 0x40, 0x04, 0, 0, 0, 0, 0, 0}
	buf := make([]byte, 0, 256) // in the bridge, a pooled buffer
	out, err := interchange.AppendJSON(buf, args)
	fmt.Println(string(out), err)
	// Output: {"q":"go","n":[1,2.5]} <nil>
}

func ExampleFault() {
	_, err := interchange.ToMsgPack([]byte(`{"items":[{"id":1},{"id":18446744073709551616}]}`))
	var f *interchange.Fault
	if errors.As(err, &f) {
		fmt.Println(f.Kind, f.Path, f.Offset)
		fmt.Println(err)
	}
	// Output:
	// integer_range /items/1/id 25
	// interchange: json: integer outside [-2^63, 2^64-1] at "/items/1/id" (byte 25)
}
