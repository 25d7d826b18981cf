/**
 * Text that came from outside (a heap label's value, which memcached's
 * clients choose as their keys' prefixes; a function name) shown where a
 * character of it could do harm: a line break forges a line of a tree, an
 * escape sequence drives the terminal that reads it, and a C0 control is
 * no character of XML 1.0 at all (the SVG then does not load: Chromium
 * shows "Invalid character U+0001" instead of the flamegraph).
 *
 * escapeControls shows each such character as a visible escape:
 * `\xNN` for C0 (tab and line breaks among them), DEL and C1, `\uNNNN` for
 * the Unicode line and paragraph separators (U+2028, U+2029), the
 * non-characters XML forbids (U+FFFE, U+FFFF) and a lone surrogate (no
 * UTF-8 for it). Everything else, a backslash too, is shown as it is: the
 * escapes are for reading, and the formats that carry any string (json,
 * .heapprofile, pprof) carry the exact value. U+FFFD was the other choice:
 * it would say "something was here" but not what, and two values that
 * differ only there would read alike.
 */

/** Every character escapeControls escapes, as a RegExp source (the dashboard's runtime/dashboard/text.ts has the same one, held to this by a test). */
const UNSAFE_SOURCE = "[\\u0000-\\u001f\\u007f-\\u009f\\u2028\\u2029\\ufffe\\uffff]|[\\ud800-\\udbff](?![\\udc00-\\udfff])|(?<![\\ud800-\\udbff])[\\udc00-\\udfff]";
const UNSAFE = new RegExp(UNSAFE_SOURCE);
const UNSAFE_ALL = new RegExp(UNSAFE_SOURCE, "g");

/** `\xNN` below U+0100, `\uNNNN` above, lower-case hex: `\x1b`, `\u2028`. */
function escapeOne(c: string): string {
  const code = c.charCodeAt(0);
  return code < 0x100 ? `\\x${code.toString(16).padStart(2, "0")}` : `\\u${code.toString(16).padStart(4, "0")}`;
}

/** `text` with its control characters, separators, XML's non-characters and lone surrogates as visible escapes; the same string when it has none. */
export function escapeControls(text: string): string {
  return UNSAFE.test(text) ? text.replace(UNSAFE_ALL, escapeOne) : text;
}
