// Results (docs/capwire.md, "Results and content blocks"), under the
// spec's names.

/** A text block. */
export interface TextBlock {
  type: "text";
  text: string;
}

/**
 * A marker for a block that did not cross the wire: kind is the MCP block
 * type ("image", "audio", "resource_link", "resource", ...).
 */
export interface OtherBlock {
  type: "other";
  kind: string;
}

/** A block of a type a newer capbridge sends; only its type is kept. */
export interface UnknownBlock {
  type: string;
}

export type Block = TextBlock | OtherBlock | UnknownBlock;

/** Reports whether b is a text block. */
export function isText(b: Block): b is TextBlock {
  return b.type === "text" && "text" in b;
}

/** Reports whether b is an other-kind marker. */
export function isOther(b: Block): b is OtherBlock {
  return b.type === "other" && "kind" in b;
}

/**
 * What a tool returned. A tool that ran and failed is a Result with
 * is_error set, not an error: the server's own words are in content.
 */
export class Result {
  /** The tool ran and reported failure (MCP isError). */
  readonly is_error: boolean;
  readonly content: readonly Block[];
  /**
   * The tool's structuredContent, decoded from MessagePack (maps become
   * plain objects, binary data Uint8Array); undefined when it gave none.
   */
  readonly structured: unknown;
  /** capbridge cut the content to fit its limits. */
  readonly truncated: boolean;

  constructor(r: { is_error: boolean; content: readonly Block[]; structured?: unknown; truncated?: boolean }) {
    this.is_error = r.is_error;
    this.content = r.content;
    this.structured = r.structured;
    this.truncated = r.truncated ?? false;
  }

  /** The text blocks joined with "\n". */
  text(): string {
    return this.content
      .filter(isText)
      .map((b) => b.text)
      .join("\n");
  }
}
