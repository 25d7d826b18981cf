/**
 * escapeControls, what every text output and the SVG show a label value or
 * a frame name through, checked against an independent list of what must
 * not be shown raw, over every UTF-16 code unit; and the dashboard's
 * browser form of it (shown, runtime/dashboard/text.ts) agrees on every one.
 */
import { describe, expect, it } from "vitest";
import { escapeControls } from "../src/display-text.js";
import { NO_LABEL } from "../src/report/labels.js";
import { NO_LABEL as PAGE_NO_LABEL, shown } from "../src/runtime/dashboard/text.js";

/** The rule, written apart from the code: C0, DEL, C1, U+2028/2029, U+FFFE/FFFF and surrogates (alone: these are single code units). */
const mustEscape = (code: number): boolean =>
  code <= 0x1f || (code >= 0x7f && code <= 0x9f) || code === 0x2028 || code === 0x2029 || code === 0xfffe || code === 0xffff || (code >= 0xd800 && code <= 0xdfff);
const expected = (code: number): string => (code < 0x100 ? `\\x${code.toString(16).padStart(2, "0")}` : `\\u${code.toString(16).padStart(4, "0")}`);

describe("escapeControls", () => {
  it("escapes exactly the characters no text output may carry raw, every code unit, as the dashboard's form does", () => {
    let escaped = 0;
    for (let code = 0; code <= 0xffff; code++) {
      const c = String.fromCharCode(code);
      const want = mustEscape(code) ? expected(code) : c;
      if (escapeControls(c) !== want) expect(escapeControls(c), code.toString(16)).toBe(want);
      if (shown(c) !== want) expect(shown(c), code.toString(16)).toBe(want);
      if (want !== c) escaped++;
    }
    expect(escaped).toBe(32 + 33 + 2 + 2 + 2048);
  });

  it("keeps surrogate pairs, backslashes and ordinary text; the same string back when there is nothing to escape", () => {
    const plain = "prefix=user \\x01 é中😀 (file:///app/main.js:1:2)";
    expect(escapeControls(plain)).toBe(plain);
    expect(escapeControls("t\x01\x1b[2J\n\u2028\ud800x\udc00😀")).toBe("t\\x01\\x1b[2J\\x0a\\u2028\\ud800x\\udc00😀");
    expect(shown("t\x01\x1b[2J\n\u2028\ud800x\udc00😀")).toBe("t\\x01\\x1b[2J\\x0a\\u2028\\ud800x\\udc00😀");
  });

  it("the dashboard names the sites without a label as the reports do", () => {
    expect(PAGE_NO_LABEL).toBe(NO_LABEL);
  });
});
