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
// The package has three layers:
//
//   - Codecs, pure functions of their arguments: FrameReader (length
//     checked before anything is allocated), Decode (total: any bytes give
//     a Message or a *WireError saying whether the connection can go on),
//     AppendMessage and AppendFrame (deterministic, and never writing what
//     Decode would refuse). Envelopes are decoded by hand over the bytes,
//     and args/structured travel as raw MessagePack sub-slices.
//   - ServerConn, capbridge's side of one connection: handshake, a read
//     loop, and a serialized, bounded writer with a write deadline.
//   - Client, what generated Go façades import: Dial/FromEnv/Shared, Call
//     with concurrent calls multiplexed on one connection, cancellation by
//     context, and typed errors per code (*Denied, sentinels such as
//     ErrTimeout, ErrClosed).
package capwire
