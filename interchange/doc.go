// Package interchange implements total conversion between MessagePack and
// JSON, refusing with a typed, path-named fault every value that has no
// exact counterpart on the other side.
//
// Tool arguments travel from a jailed program as MessagePack and must reach
// an MCP server as JSON; a tool's structuredContent comes back as JSON and
// must reach the program as MessagePack. A conversion that wraps
// an integer, guesses an encoding for binary or silently keeps one of two
// duplicate keys corrupts a call without anyone knowing, so this package
// never wraps, clamps or guesses: a value converts exactly or the whole
// conversion fails with a [*Fault].
//
// Both directions are single-pass byte scanners: no reflection, no
// intermediate map[string]any, and no allocation when the caller's dst has
// room (scratch space for duplicate-key detection comes from a pool).
// [AppendJSON] and [AppendMsgPack] append to a caller's buffer; [ToJSON]
// and [ToMsgPack] allocate one. All functions are safe for concurrent use.
//
// # MessagePack to JSON
//
//	MessagePack                         JSON
//	nil                                 null
//	false, true                         false, true
//	positive/negative fixint,           the exact integer ("18446744073709551615",
//	  uint 8/16/32/64, int 8/16/32/64     "-9223372036854775808")
//	float64                             the shortest decimal that parses back to the
//	                                      same float64, ECMAScript style, always with
//	                                      "." or an exponent: 1 → "1.0", 1e21 → "1e+21",
//	                                      -0 → "-0.0", 1e-7 → "1e-7"
//	float32                             widened exactly to float64, then as float64
//	                                      (0.1f → "0.10000000149011612")
//	NaN, ±Inf (either width)            fault non_finite
//	fixstr, str 8/16/32 (UTF-8)         string; only '"', '\' and U+0000–U+001F are
//	                                      escaped (\n \r \t \b \f, else \u00XX)
//	str with invalid UTF-8              fault invalid_utf8
//	bin 8/16/32                         fault binary (no guessed base64)
//	ext 8/16/32, fixext (timestamps)    fault extension
//	fixarray, array 16/32               array
//	fixmap, map 16/32 with str keys     object, members in input order
//	map key that is not a str           fault non_string_key
//	the same key twice in one map       fault duplicate_key
//	0xc1 (never used)                   fault syntax
//	bytes after the value               fault trailing_bytes
//	input ending inside a value         fault truncated
//
// # JSON to MessagePack
//
// Input is parsed strictly by RFC 8259: no comments, trailing commas,
// leading zeros, "+", NaN, Infinity, single quotes or raw control
// characters in strings; white space only between tokens. The tokens are
// read by capbridge's one JSON lexer (internal/jsonlex, which mcpwire
// reads MCP lines with too), in its strict dialect: strings must be UTF-8
// and may not hold a lone surrogate escape, which mcpwire instead reads
// as U+FFFD like encoding/json. The conversion is still one pass: the
// lexer's primitives validate each token as the converter writes it.
//
//	JSON                                MessagePack
//	null, false, true                   nil, false, true
//	integer (no fraction, no exponent)  the smallest form: fixint, uint 8/16/32/64
//	  in [-2^63, 2^64-1]                  for ≥ 0 ("-0" is 0), negative fixint,
//	                                      int 8/16/32/64 for < 0
//	integer outside that range          fault integer_range (the whole conversion:
//	                                      no wrapping, clamping or float fallback)
//	number with fraction or exponent    float64, correctly rounded; underflow rounds
//	                                      to a subnormal or zero
//	  overflowing float64               fault float_overflow
//	string                              str in the smallest form; escapes decoded,
//	                                      surrogate pairs joined
//	  with a lone surrogate escape      fault lone_surrogate
//	  with invalid UTF-8                fault invalid_utf8
//	array                               fixarray, array 16/32
//	object                              fixmap, map 16/32 with str keys, in input order
//	  with a key twice (compared        fault duplicate_key
//	    after decoding escapes)
//
// # Round trips
//
// Every MessagePack value that converts to JSON converts back to an equal
// value, with two normalisations: integers come back in their smallest
// form (a uint64 holding 5 becomes a fixint), and float32 comes back as the
// float64 of the same value. Floats stay floats and integers stay integers,
// which is why a float is always written with "." or an exponent. The JSON
// a value converts to is a fixed point: converting it to MessagePack and
// back yields the same text.
//
// # Limits
//
// Arrays and objects may nest [MaxDepth] deep, the same in both
// directions, so a value converting one way never fails the other way on
// depth; it is bound.MaxDepth, which capwire and mcpwire enforce too. The caller bounds the input; the output is then bounded
// linearly (at most 6 bytes of JSON per byte of MessagePack, reached by
// strings of control characters, and at most 3 bytes of MessagePack per
// byte of JSON, reached by "1e1" becoming a 9-byte float64), and
// [Limits.MaxOutput] bounds it outright. Duplicate keys are found by
// comparing with earlier keys in objects of up to 16 members and with a
// hash set above that, so detection stays linear in the input.
//
// # Faults
//
// Every failure is a [*Fault]; reach it with errors.As. Fault.Path is the
// RFC 6901 JSON Pointer of the offending value ("" for the whole
// document, "/items/3/na~1me" for key "na/me") and is assembled only
// while a failing conversion unwinds, so the success path pays nothing
// for it. Fault.Offset is a byte offset in the input. When an input has
// several faults, the one the single pass meets first is reported. The
// kinds form a closed set:
//
//	kind (String)    direction  Offset            Path names
//	truncated        both       len(input)        the value being read
//	trailing_bytes   both       first extra byte  "" (the document)
//	syntax           both       the bad byte      the value being read, or the
//	                                                container for a bad separator
//	invalid_utf8     both       the bad byte      the string; for a key, its map
//	lone_surrogate   JSON       the "\u" escape   the string; for a key, its object
//	binary           MsgPack    the bin value     the value
//	extension        MsgPack    the ext value     the value
//	non_string_key   MsgPack    the key           the map
//	duplicate_key    both       the second key    the member (second occurrence)
//	non_finite       MsgPack    the float         the value
//	integer_range    JSON       the number        the value
//	float_overflow   JSON       the number        the value
//	depth            both       the container     the container MaxDepth+1 deep
//	too_large        both       where it stopped  the value being written
//
// The kinds' String forms are stable identifiers; Fault's message text
// ("interchange: json: duplicate key at "/a" (byte 7)") is for people.
package interchange
