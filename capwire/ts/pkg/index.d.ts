export { Client, shared, describe, search, readResource, start, collect, drop, envSocket, envToken, type CallOptions, type DialOptions, type Match } from "./client.js";
export { Denial, Fatal, isDenialCode, isFatalCode, retryable, type DenialCode, type FatalCode } from "./codes.js";
export { CapwireError, ClosedError, DeniedError, FatalError, NoEnvError, WireError, hasCode, isClosed, isDenied } from "./errors.js";
export { capBridge, capPrefix, decode, defaultMaxFrame, encodeArgs, encodeCall, encodeCancel, encodeHello, version, type Message } from "./envelope.js";
export { FrameReader } from "./frame.js";
export { DecodeError, decodeStructured, type Field, type Shape, type Shapes } from "./shape.js";
export { Result, isText, type Block } from "./result.js";
