/**
 * Answer lines as bytes: memcached's fixed words (protocol.ts REPLY) made
 * into Buffers once, so an answer that is a fixed word costs no encoding;
 * the classic commands and the stats answers both write them.
 */
import { REPLY } from "./protocol.js";

/** A piece of an answer: a Buffer (a fixed word, or a view of an item in the heap) or latin1 text. */
export type Chunk = Buffer | string;

/** `text` and its \r\n, as latin1 bytes (keys are bytes, one char a byte). */
export const line = (text: string): Buffer => Buffer.from(`${text}\r\n`, "latin1");
const WORDS = new Map<string, Buffer>(Object.values(REPLY).map((w) => [w, line(w)]));
/** A fixed answer's line, made once. */
export const word = (w: string): Buffer => WORDS.get(w) ?? line(w);
/** A failure's answer: memcached's SERVER_ERROR, on one line whatever the message holds. */
export const serverError = (e: unknown): Buffer => line(`SERVER_ERROR ${e instanceof Error ? e.message : String(e)}`.replace(/[\r\n]+/g, " "));
