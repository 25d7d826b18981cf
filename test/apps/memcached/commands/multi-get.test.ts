/**
 * A get's keys on their own (multi-get.ts, get-keys.ts), against a
 * connection stand-in: read in place from the line, answered in order, a
 * get of many keys waiting between two keys while the connection is full
 * and going on from the next, END once at the end.
 */
import { describe, expect, it } from "vitest";
import { KeyCursor, countKeys } from "../../../../dist/apps/memcached/protocol/get-keys.js";
import { MultiGet, getKey, type GetContext, type GetHost } from "../../../../dist/apps/memcached/commands/multi-get.js";
import { parseCommand } from "../../../../dist/apps/memcached/protocol/protocol.js";

/** What the stand-in was asked to do, in order, as text. */
interface Stand {
  host: GetHost;
  events: string[];
  /** full() answers true this many times from now on. */
  fullFor: number[];
}

/** A connection: `hits` are found (a reference each). */
function stand(hits: ReadonlySet<string>): Stand {
  const events: string[] = [];
  const fullFor: number[] = [];
  const ctx = { detail: { enabled: false } } as unknown as GetContext;
  let full = 0;
  const host: GetHost = {
    ctx,
    now: () => 1000,
    lookup: (key) => (hits.has(key) ? 1 : 0),
    hit: (_ref, _withCas, last) => events.push(`hit${last ? " END" : ""}`),
    answer: (chunk) => events.push(chunk.toString().trim()),
    full: () => (full++, fullFor.includes(full)),
  };
  return { host, events, fullFor };
}

const keysOf = (line: string) => {
  const cmd = parseCommand(line, line.length + 2);
  if (cmd.kind !== "get") throw new Error(`not a get: ${JSON.stringify(cmd)}`);
  return cmd;
};

describe("a get's keys, read in place", () => {
  it("counts and walks keys whatever the spaces, refusing one too long", () => {
    const line = "get  a  bb   c ";
    expect(countKeys(line, 3, 250)).toBe(3);
    expect(countKeys(`get a ${"k".repeat(251)} b`, 3, 250)).toBe(-1);
    const cursor = new KeyCursor({ line, from: 3, count: 3 });
    const seen: string[] = [];
    for (let k = cursor.next(); k !== undefined; k = cursor.next()) seen.push(`${k}${cursor.done ? "." : ""}`);
    expect(seen).toEqual(["a", "bb", "c."]);
  });

  it("a line of one key is that key; of many, the line and where they start; gat with none, none", () => {
    expect(keysOf("get k").keys).toBe("k");
    expect(keysOf("  gets   k  ").keys).toBe("k");
    expect(keysOf("gat 10 a b").keys).toEqual({ line: "gat 10 a b", from: 6, count: 2 });
    expect(keysOf("gats 10").keys).toEqual({ line: "gats 10", from: 7, count: 0 });
    expect(keysOf("get a\0 b").keys).toBe("a");
  });
});

describe("MultiGet", () => {
  const keys = (line: string) => keysOf(line).keys as Exclude<ReturnType<typeof keysOf>["keys"], string>;

  it("answers in order, waits while the connection is full, goes on from the next key, END once", () => {
    const s = stand(new Set(["a", "c", "d"]));
    s.fullFor.push(1, 2, 4);
    const g = new MultiGet(s.host, keys("get a b c d e"), false, undefined);
    expect(g.run()).toBe(false); // full after a
    expect(s.events).toEqual(["hit"]);
    expect(g.run()).toBe(false); // full after b (a miss: nothing)
    expect(g.run()).toBe(false); // c, then d, full after d
    expect(g.run()).toBe(true); // e, the last: a miss, END
    expect(s.events).toEqual(["hit", "hit", "hit", "END"]);
    // The last key a hit: END in its answer.
    const t = stand(new Set(["a", "b"]));
    expect(new MultiGet(t.host, keys("get a b"), false, undefined).run()).toBe(true);
    expect(t.events).toEqual(["hit", "hit END"]);
  });

  it("one key: a hit carries END, a miss answers END alone", () => {
    const s = stand(new Set(["a"]));
    getKey(s.host, "a", false, undefined, true, false);
    getKey(s.host, "b", true, undefined, true, false);
    expect(s.events).toEqual(["hit END", "END"]);
  });

  it("gat with no key: END alone", () => {
    const s = stand(new Set());
    expect(new MultiGet(s.host, keys("gat 10"), false, 1010).run()).toBe(true);
    expect(s.events).toEqual(["END"]);
  });
});
