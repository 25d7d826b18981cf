/**
 * The table of requests and answers of memcached's ASCII protocol
 * (protocol-cases.ts) checked against Debian's memcached 1.6 itself, when
 * it is installed, so the table says what memcached says (shardheap's side:
 * protocol.test.ts).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { installed, startReferenceMemcached } from "./client.js";
import { BINARY_ME, CASES, DEBUG_LINE, META_COUNTED, binaryMe, counted, debugLine, expected1618, highBytes, run } from "./protocol-cases.js";

const haveMemcached = installed("memcached", ["-V"]);
if (!haveMemcached) console.warn("memcached reference check SKIPPED: Debian's memcached is not installed (apt-get install memcached)");

describe.runIf(haveMemcached)("memcached 1.6 itself (the reference the table follows)", () => {
  let reference: Awaited<ReturnType<typeof startReferenceMemcached>>;
  beforeAll(async () => {
    reference = await startReferenceMemcached();
  });
  afterAll(async () => {
    await reference?.stop();
  });

  it.each(CASES.map((c, i) => [c.name, c, i] as const).filter(([, c]) => c.suiteOnly === undefined))("%s", async (_name, c, i) => {
    const key = `p${i}k`;
    expect(await run(reference.port, c, key)).toBe(expected1618(c, key));
  });

  it("a key's bytes past 0x7f come back as sent in me and stats cachedump; t of an exptime passed counts back from 2^32", async () => {
    const got = await highBytes(reference.port);
    expect(got.me).toMatch(/^ME hi\xe9\xff exp=-1 /);
    // (not its cachedump: memcached lists its cold LRU only, which a new item reaches when its LRU maintainer gets to it.)
    expect(got.ttl).toBeGreaterThanOrEqual(2 ** 31);
    expect(got.ttl).toBeLessThanOrEqual(2 ** 32 - 61);
  });

  it("me of a base64 key: in base64 as sent, a plain item's key plain", async () => {
    expect(await binaryMe(reference.port)).toMatch(BINARY_ME.answer);
  });

  it("me: an item's metadata in this form", async () => {
    // 1.6.18 prints the TTL negated (exp=-100); the suite's revision, and shardheap, exp=100.
    expect((await debugLine(reference.port, "debugged")).replace(" exp=-", " exp=")).toMatch(DEBUG_LINE);
  });

  it("counts meta commands in stats so", async () => {
    const own = await startReferenceMemcached(); // its own, as above: curr_items is the whole cache's
    try {
      expect(await counted(own.port, META_COUNTED.script.replaceAll("{k}", "counted"), Object.keys(META_COUNTED.counts))).toEqual(META_COUNTED.counts);
    } finally {
      await own.stop();
    }
  });
});
