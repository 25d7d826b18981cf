/**
 * Text as the reports show it, for the page: no DOM, so the tests load it
 * in Node and hold it to the server's own (display-text.ts escapeControls,
 * report/labels.ts NO_LABEL) on every UTF-16 code unit. The page cannot
 * import those files themselves: it is served only its own folder, and
 * NO_LABEL's file reaches into the allocator's.
 */

/** How the sites without a label are named (report/labels.ts NO_LABEL). */
export const NO_LABEL = "(none)";

/** C0, DEL, C1, U+2028/2029, U+FFFE/FFFF and lone surrogates: display-text.ts's UNSAFE_SOURCE. */
const UNSAFE_TEXT = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\ufffe\uffff]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

/**
 * A label value or frame name with its control characters as visible
 * escapes (`\x1b`, `\u2028`), as the SVG and the tree show it, so the page
 * finds a frame in the SVG by the same name.
 */
export function shown(text: string): string {
  return String(text).replace(UNSAFE_TEXT, (c) => {
    const code = c.charCodeAt(0);
    return code < 0x100 ? "\\x" + code.toString(16).padStart(2, "0") : "\\u" + code.toString(16).padStart(4, "0");
  });
}
