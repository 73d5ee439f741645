import { WireError } from "./errors.js";
/**
 * Splits a byte stream into frame payloads. The length is checked against
 * maxFrame before anything is kept for the payload, and a payload is put
 * together only once all of its bytes have arrived, so a peer that
 * announces 16 MiB and sends 10 bytes costs 10 bytes. Not safe for
 * concurrent use (nothing in Node is).
 */
export declare class FrameReader {
    readonly maxFrame: number;
    private chunks;
    private have;
    private need;
    constructor(maxFrame: number);
    /**
     * Takes the next bytes of the stream and returns the payloads they
     * complete. A zero length is a fatal bad_frame and a length above
     * maxFrame a fatal frame_too_large (a WireError thrown); the reader must
     * not be used after that.
     */
    push(chunk: Uint8Array): Uint8Array[];
    /**
     * The fault of a stream that ended now: undefined between frames (an
     * orderly close), a fatal bad_frame inside a prefix or a payload.
     */
    endFault(): WireError | undefined;
    private take;
}
