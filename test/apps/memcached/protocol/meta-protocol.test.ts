/**
 * The meta protocol's line parser (meta-protocol.ts): flags and their
 * tokens, memcached's error words, what an ms swallows, base64 keys, and
 * the order answers give flags back in. Over the wire (against Debian's
 * memcached too): test/apps/memcached/protocol.test.ts.
 */
import { describe, expect, it } from "vitest";
import { MAX_CAS_IN, answerFlags, decodeKey, encodeKey, exptimePlan, parseFlags, parseMeta, type MetaFlags } from "../../../../dist/apps/memcached/protocol/meta-protocol.js";
import { MODE_ADD, MODE_APPEND, MODE_CAS, MODE_PREPEND, MODE_REPLACE, MODE_SET } from "../../../../dist/apps/memcached/protocol/protocol.js";

const tokens = (line: string): string[] => line.split(" ").filter((t) => t !== "");
const meta = (line: string): ReturnType<typeof parseMeta> => parseMeta(tokens(line));
const flagsOf = (line: string): MetaFlags => {
  const f = parseFlags(tokens(line), 2);
  if (typeof f === "string") throw new Error(f);
  return f;
};

describe("meta protocol lines", () => {
  it("reads every flag and its token", () => {
    const f = flagsOf("mg key v q u k s t c f h l I x T30 N-5 R60");
    expect(f).toMatchObject({ key: "key", value: true, quiet: true, noBump: true, invalidate: true, removeValue: true, ttl: 30, vivify: -5, recache: 60 });
    expect(f.tokens[0]).toBe("v");
    const g = flagsOf("mg key C18446744073709551615 E12 F4294967295 MA J7 D9 Oabc P/x L1");
    expect(g).toMatchObject({ compareCas: "18446744073709551615", casIn: 12, clientFlags: 4294967295, mode: "A", initial: "7", delta: "9" });
    // Defaults: ma's delta 1 and initial 0, no TTL.
    expect(flagsOf("ma key")).toMatchObject({ delta: "1", initial: "0", ttl: undefined, vivify: undefined, compareCas: undefined, casIn: undefined });
  });

  it("answers memcached's words for bad flags and tokens", () => {
    expect(meta("mg k !")).toEqual({ kind: "meta-error", reply: "CLIENT_ERROR invalid flag", swallow: 0 });
    expect(meta("mg k v v")).toMatchObject({ reply: "CLIENT_ERROR duplicate flag" });
    expect(meta("mg k T")).toMatchObject({ reply: "CLIENT_ERROR bad token in command line format" });
    expect(meta("mg k T2147483648")).toMatchObject({ reply: "CLIENT_ERROR bad token in command line format" });
    expect(meta("md k C-1")).toMatchObject({ reply: "CLIENT_ERROR bad token in command line format" });
    expect(meta("mg k Fx")).toMatchObject({ reply: "CLIENT_ERROR bad command line format" });
    // ma words them all one way, but its own modes.
    expect(meta("ma k !")).toMatchObject({ reply: "CLIENT_ERROR invalid or duplicate flag" });
    expect(meta("ma k Dx")).toMatchObject({ reply: "CLIENT_ERROR invalid or duplicate flag" });
    expect(meta("ma k MX")).toMatchObject({ reply: "CLIENT_ERROR invalid mode for ma M token" });
    // A bare M is no mode it knows: memcached reads the byte after the M (the suite's revision; 1.6.18 refused its length).
    expect(meta("ma k M")).toMatchObject({ reply: "CLIENT_ERROR invalid mode for ma M token" });
    expect(meta("ma k M v")).toMatchObject({ reply: "CLIENT_ERROR invalid mode for ma M token" });
    expect(meta("ms k 1 M")).toEqual({ kind: "meta-error", reply: "CLIENT_ERROR invalid mode for ms M token", swallow: 3 });
    expect(meta(`mg k O${"o".repeat(31)}`)).toMatchObject({ kind: "mg", flags: { opaqueTooLong: false } });
    expect(meta(`mg ${"k".repeat(251)} v`)).toMatchObject({ reply: "CLIENT_ERROR bad command line format" });
    expect(meta(`mg k ${"s ".repeat(19)}`)).toMatchObject({ reply: "CLIENT_ERROR options flags are too long" });
    expect(meta("mg")).toMatchObject({ reply: "CLIENT_ERROR bad command line format" });
    // A bad token is noted and the parse goes on; a later one is what is answered, an invalid flag ends it at once.
    expect(meta("mg k Tx Nx !")).toMatchObject({ reply: "CLIENT_ERROR invalid flag" });
    expect(meta("mg k Fx Tx")).toMatchObject({ reply: "CLIENT_ERROR bad token in command line format" });
    // An E past what a cas value holds here (doubles, exact below 2^53) is refused rather than rounded.
    expect(meta(`ms k 1 E${MAX_CAS_IN}`)).toMatchObject({ kind: "ms" });
    expect(meta(`ms k 1 E${BigInt(MAX_CAS_IN) + 1n}`)).toMatchObject({ reply: "CLIENT_ERROR bad token in command line format", swallow: 3 });
  });

  it("an opaque too long is found after every other error of the line, as memcached finds it while answering", () => {
    const long = `O${"o".repeat(32)}`;
    // A bad token, a duplicate, an unknown flag or a bad mode comes first.
    expect(meta(`mg k ${long} Tx`)).toMatchObject({ reply: "CLIENT_ERROR bad token in command line format" });
    expect(meta(`mg k ${long} v v`)).toMatchObject({ reply: "CLIENT_ERROR duplicate flag" });
    expect(meta(`mg k ${long} !`)).toMatchObject({ reply: "CLIENT_ERROR invalid flag" });
    expect(meta(`ma k ${long} Dx`)).toMatchObject({ reply: "CLIENT_ERROR invalid or duplicate flag" });
    expect(meta(`ma k ${long} MX`)).toMatchObject({ reply: "CLIENT_ERROR invalid mode for ma M token" });
    expect(meta(`ms k 1 ${long} Fx`)).toMatchObject({ reply: "CLIENT_ERROR bad command line format", swallow: 3 });
    // Then the opaque: md before it looks the key up (nothing done); mg, ma and ms run, and answer it (meta-commands.ts).
    expect(meta(`md k ${long} q`)).toEqual({ kind: "meta-error", reply: "CLIENT_ERROR opaque token too long", swallow: 0 });
    for (const line of [`mg k ${long}`, `ma k ${long}`, `ms k 1 ${long}`]) expect(meta(line), line).toMatchObject({ flags: { opaqueTooLong: true } });
  });

  it("T and N in their order: an item N creates gets the last of them, t the one of its place; nothing after an O too long", () => {
    const plan = (line: string): ReturnType<typeof exptimePlan> => exptimePlan(flagsOf(line), 1000, 2000);
    // mg nk t N100: t first reports the new item's "no exptime"; N after T wins, and T after N.
    expect(plan("mg k t N100")).toMatchObject({ created: 2000, createdAtT: 0, touch: -1 });
    expect(plan("ma k T-1 N100 t")).toMatchObject({ created: 2000, createdAtT: 2000, touch: 1000, touchedAtT: true });
    expect(plan("ma k N100 T-1")).toMatchObject({ created: 1000, touch: 1000 });
    expect(plan("mg k t T30")).toMatchObject({ touchedAtT: false, touch: 1000 });
    // R reads the item's own exptime when it comes before T.
    expect([plan("mg k R30 T30").recacheFirst, plan("mg k T30 R30").recacheFirst, plan("mg k R30").recacheFirst]).toEqual([true, false, false]);
    expect(plan(`mg k N30 O${"o".repeat(32)} T30`)).toMatchObject({ created: 2000, touch: -1 });
    expect(plan(`mg k O${"o".repeat(32)} N30 T30`)).toMatchObject({ created: 0, touch: -1 });
  });

  it("an ms error swallows the announced bytes and their \\r\\n, unless the length itself is unreadable", () => {
    expect(meta("ms k 5 !")).toEqual({ kind: "meta-error", reply: "CLIENT_ERROR invalid flag", swallow: 7 });
    expect(meta("ms k 5 MZ")).toEqual({ kind: "meta-error", reply: "CLIENT_ERROR invalid mode for ms M token", swallow: 7 });
    expect(meta(`ms ${"k".repeat(251)} 0`)).toEqual({ kind: "meta-error", reply: "CLIENT_ERROR bad command line format", swallow: 2 });
    expect(meta("ms k 2147483645 b")).toMatchObject({ swallow: 2147483647 });
    for (const line of ["ms k", "ms k x", "ms k -1", "ms k 2147483646", "ms k 1.5"]) {
      expect(meta(line), line).toEqual({ kind: "meta-error", reply: "CLIENT_ERROR bad command line format", swallow: 0 });
    }
  });

  it("ms modes, and C making set and replace the cas command", () => {
    const mode = (line: string): number => {
      const c = meta(line);
      if (c.kind !== "ms") throw new Error(JSON.stringify(c));
      return c.mode;
    };
    expect([mode("ms k 1"), mode("ms k 1 MS"), mode("ms k 1 ME"), mode("ms k 1 MA"), mode("ms k 1 MP"), mode("ms k 1 MR")]).toEqual([MODE_SET, MODE_SET, MODE_ADD, MODE_APPEND, MODE_PREPEND, MODE_REPLACE]);
    expect([mode("ms k 1 C5"), mode("ms k 1 MR C5"), mode("ms k 1 ME C5"), mode("ms k 1 MA C5")]).toEqual([MODE_CAS, MODE_CAS, MODE_ADD, MODE_APPEND]);
    expect(meta("ma k MD")).toMatchObject({ kind: "ma", incr: false });
    expect(meta("ma k M-")).toMatchObject({ kind: "ma", incr: false });
    expect(meta("ma k M+")).toMatchObject({ kind: "ma", incr: true });
    expect(meta("mn anything at all")).toEqual({ kind: "mn" });
  });

  it("base64 keys: decoded as memcached's decoder does, encoded again for k; what it cannot decode is an error", () => {
    expect(decodeKey("44OG44K544OI")).toBe(Buffer.from("テスト").toString("latin1"));
    expect(encodeKey(decodeKey("44OG44K544OI")!, true)).toBe("44OG44K544OI");
    expect(flagsOf("mg AAEC/w== b")).toMatchObject({ key: "\u0000\u0001\u0002\u00ff", binary: true });
    // memcached skips what is not in its alphabet, and a padded block ends the key.
    expect([decodeKey("QU*JD"), decodeKey("Q-U.J_D"), decodeKey("QQ==QUJD"), decodeKey("ab=c"), decodeKey("QUJD\u00e9")]).toEqual(["ABC", "ABC", "A", "i\u00b0", "ABC"]);
    // Nothing left, a count of characters not a multiple of four, three "=": nothing decoded.
    for (const bad of ["", "abc", "a*bc", "====", "A===", "*-*-"]) expect(decodeKey(bad), bad).toBeUndefined();
    expect(meta("mg a*bc b v")).toMatchObject({ reply: "CLIENT_ERROR error decoding key" });
    expect(meta("me AAEC/w== b")).toEqual({ kind: "me", key: "\u0000\u0001\u0002\u00ff", binary: true });
  });

  it("answer flags come back in the order they were asked, O echoed, k with b for binary keys", () => {
    const f = flagsOf("mg a2V5 t Oxy v b s k c");
    expect(answerFlags(f, { s: 3, t: -1, c: 42 })).toBe(" t-1 Oxy s3 ka2V5 b c42");
    // Flags a command does not report answer nothing; O and k come back on a miss too.
    expect(answerFlags(flagsOf("mg key s v Oq k"))).toBe(" Oq kkey");
  });
});
