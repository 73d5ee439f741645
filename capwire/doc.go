// Package capwire implements the capability wire between jailed programs
// and capbridge, as specified normatively in docs/capwire.md (wire v1).
//
// A connection carries frames: a 4-byte big-endian length N, then N bytes
// holding exactly one MessagePack map, the envelope, whose "t" names its
// type. A client says hello with its grant token and is welcomed with the
// servers it may reach; then it sends calls (and cancels), each answered by
// exactly one result or denial, in any order; a fatal frame ends the
// connection.
//
// Every generated Go façade imports this package, so what it exports is
// what programs, the bridge and embedders need, and no more. It has two
// layers:
//
//   - Client, what façades use: Dial/FromEnv/Shared, Call with concurrent
//     calls multiplexed on one connection, cancellation by context, and
//     typed errors per code (*Denied, sentinels such as ErrTimeout,
//     ErrClosed).
//   - Codecs that both ends share, pure functions of their arguments:
//     FrameReader (length checked before anything is allocated), Decode
//     (total: any bytes give a Message or a *WireError saying whether the
//     connection can go on), AppendFrame and AppendFramed (deterministic,
//     and never writing what Decode would refuse). Envelopes are decoded
//     by hand over the bytes, and args/structured travel as raw
//     MessagePack sub-slices.
//
// capbridge's side of a connection (handshake, read loop, batched writer)
// is bridge/internal/capserver, which only the bridge imports.
package capwire
