/**
 * One content block of a result. kind says what it is: "text" (text), an
 * "image" or "audio" clip (data, mime), an embedded "resource" (uri, mime,
 * and text or data) or a "resource_link" (uri, name, mime, size as the
 * server declares them). Bytes cross only up to capbridge's limit for a
 * result: beyond it data is undefined and size still says how many bytes
 * there were. type is the wire's block type: "text", "other" for every
 * other kind, or a newer type, kept by its type alone (kind is then "").
 */
export interface Block {
    readonly type: string;
    readonly kind: string;
    readonly text?: string;
    readonly mime?: string;
    readonly data?: Uint8Array;
    /** The data's size in bytes, carried or not, or a link's declared size; undefined when unknown. */
    readonly size?: number;
    readonly uri?: string;
    readonly name?: string;
}
/** Reports whether b is a text block (b.text is then its text). */
export declare function isText(b: Block): b is Block & {
    readonly text: string;
};
/**
 * What a tool returned. A tool that ran and failed is a Result with
 * isError set, not an error: the server's own words are in content.
 */
export declare class Result {
    /** The tool ran and reported failure (MCP isError). */
    readonly isError: boolean;
    readonly content: readonly Block[];
    /**
     * The tool's structuredContent, decoded from MessagePack (maps become
     * plain objects, binary data Uint8Array); undefined when it gave none.
     */
    readonly structured: unknown;
    /** capbridge cut the content to fit its limits. */
    readonly truncated: boolean;
    constructor(r: {
        isError: boolean;
        content: readonly Block[];
        structured?: unknown;
        truncated?: boolean;
    });
    /** The text blocks joined with "\n". */
    text(): string;
}
