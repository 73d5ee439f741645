// Framing (docs/capwire.md, "Frames"): a 4-byte big-endian length N, then
// N bytes of payload, 1 ≤ N ≤ max_frame.

import { Fatal } from "./codes.js";
import { WireError } from "./errors.js";

/**
 * Splits a byte stream into frame payloads. The length is checked against
 * maxFrame before anything is kept for the payload, and a payload is put
 * together only once all of its bytes have arrived, so a peer that
 * announces 16 MiB and sends 10 bytes costs 10 bytes. Not safe for
 * concurrent use (nothing in Node is).
 */
export class FrameReader {
  private chunks: Uint8Array[] = [];
  private have = 0;
  private need = -1; // payload length once the prefix is read

  constructor(readonly maxFrame: number) {}

  /**
   * Takes the next bytes of the stream and returns the payloads they
   * complete. A zero length is a fatal bad_frame and a length above
   * maxFrame a fatal frame_too_large (a WireError thrown); the reader must
   * not be used after that.
   */
  push(chunk: Uint8Array): Uint8Array[] {
    const out: Uint8Array[] = [];
    if (chunk.length > 0) {
      this.chunks.push(chunk);
      this.have += chunk.length;
    }
    for (;;) {
      if (this.need < 0) {
        if (this.have < 4) return out;
        const p = this.take(4);
        const n = ((p[0]! << 24) | (p[1]! << 16) | (p[2]! << 8) | p[3]!) >>> 0;
        if (n === 0) throw new WireError({ code: Fatal.BadFrame, fatal: true, msg: "zero-length frame" });
        if (n > this.maxFrame) {
          throw new WireError({ code: Fatal.FrameTooLarge, fatal: true, msg: `frame of ${n} bytes exceeds the limit of ${this.maxFrame}` });
        }
        this.need = n;
      }
      if (this.have < this.need) return out;
      out.push(this.take(this.need));
      this.need = -1;
    }
  }

  /**
   * The fault of a stream that ended now: undefined between frames (an
   * orderly close), a fatal bad_frame inside a prefix or a payload.
   */
  endFault(): WireError | undefined {
    if (this.need >= 0) {
      return new WireError({ code: Fatal.BadFrame, fatal: true, msg: `stream ended inside a frame of ${this.need} bytes` });
    }
    if (this.have > 0) return new WireError({ code: Fatal.BadFrame, fatal: true, msg: "stream ended inside a length prefix" });
    return undefined;
  }

  private take(n: number): Uint8Array {
    const first = this.chunks[0]!;
    if (first.length >= n) {
      const p = first.subarray(0, n);
      if (first.length === n) this.chunks.shift();
      else this.chunks[0] = first.subarray(n);
      this.have -= n;
      return p;
    }
    const p = new Uint8Array(n);
    let got = 0;
    while (got < n) {
      const c = this.chunks[0]!;
      const k = Math.min(c.length, n - got);
      p.set(c.subarray(0, k), got);
      got += k;
      if (k === c.length) this.chunks.shift();
      else this.chunks[0] = c.subarray(k);
    }
    this.have -= n;
    return p;
  }
}
