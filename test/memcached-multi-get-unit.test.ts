/**
 * A get's keys on their own (multi-get.ts, get-keys.ts), against a
 * connection stand-in: read in place from the line, answered in order, a
 * get of many keys waiting between two keys while the connection is full
 * and going on from the next, END once at the end, and an owner's failure
 * ending the connection only when part of the answer may be out.
 */
import { describe, expect, it } from "vitest";
import { KeyCursor, countKeys } from "../dist/apps/memcached/get-keys.js";
import { keyOwner } from "../dist/apps/memcached/key-owner.js";
import { MultiGet, getKey, type GetContext, type GetHost } from "../dist/apps/memcached/multi-get.js";
import { parseCommand } from "../dist/apps/memcached/protocol.js";

/** What the stand-in was asked to do, in order, as text. */
interface Stand {
  host: GetHost;
  events: string[];
  /** Places not completed yet, by key. */
  places: Map<string, (r: number | Error) => void>;
  /** full() answers true this many times from now on. */
  fullFor: number[];
}

/** A connection on shard 0 of 2: `hits` are found (a reference each); every other shard's key goes to its owner when `remote`. */
function stand(hits: ReadonlySet<string>, remote: boolean): Stand {
  const events: string[] = [];
  const places = new Map<string, (r: number | Error) => void>();
  const fullFor: number[] = [];
  const ctx = { shard: 0, shards: 2, detail: { enabled: false } } as unknown as GetContext;
  let full = 0;
  const host: GetHost = {
    ctx,
    now: () => 1000,
    lookup: (key) => (hits.has(key) ? 1 : 0),
    readsHere: () => !remote,
    hit: (_owner, _ref, _withCas, last) => events.push(`hit${last ? " END" : ""}`),
    answer: (chunk) => events.push(chunk.toString().trim()),
    later: (pieces) => {
      const i = events.push(`later ${pieces}`) - 1;
      return (chunks, _refs, close) => {
        events[i] = `${chunks.map((c) => c.toString().trim()).join(" ")}${close === true ? " (close)" : ""}`;
      };
    },
    toOwner: (owner, args, done) => places.set(String(args[1]), (r) => done(r)),
    hold: (owner, ref) => owner * 2 ** 30 + ref,
    failure: (e) => Buffer.from(`SERVER_ERROR ${e.message}\r\n`),
    full: () => (full++, fullFor.includes(full)),
  };
  return { host, events, places, fullFor };
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
    const s = stand(new Set(["a", "c", "d"]), false);
    s.fullFor.push(1, 2, 4);
    const g = new MultiGet(s.host, keys("get a b c d e"), false, undefined);
    expect(g.run()).toBe(false); // full after a
    expect(s.events).toEqual(["hit"]);
    expect(g.run()).toBe(false); // full after b (a miss: nothing)
    expect(g.run()).toBe(false); // c, then d, full after d
    expect(g.run()).toBe(true); // e, the last: a miss, END
    expect(s.events).toEqual(["hit", "hit", "hit", "END"]);
    // The last key a hit: END in its answer.
    const t = stand(new Set(["a", "b"]), false);
    expect(new MultiGet(t.host, keys("get a b"), false, undefined).run()).toBe(true);
    expect(t.events).toEqual(["hit", "hit END"]);
  });

  it("keys of the other shard wait in their places, counted as a hit's pieces; the last brings END", () => {
    const other = ["a", "b", "c", "d", "e", "f"].filter((k) => keyOwner(k, 2) === 1);
    const mine = ["a", "b", "c", "d", "e", "f"].filter((k) => keyOwner(k, 2) === 0);
    const line = `gets ${mine[0]} ${other[0]} ${mine[1]} ${other[1]}`;
    const s = stand(new Set(mine), true);
    expect(new MultiGet(s.host, keys(line), true, undefined).run()).toBe(true);
    expect(s.events).toEqual(["hit", "later 3", "hit", "later 3"]);
    s.places.get(other[1]!)!(0);
    s.places.get(other[0]!)!(0);
    expect(s.events).toEqual(["hit", "", "hit", "END"]);
  });

  it("an owner that cannot answer: SERVER_ERROR in the key's place, and the connection ends after it for many keys, not for one", () => {
    const other = ["a", "b", "c", "d"].filter((k) => keyOwner(k, 2) === 1);
    const s = stand(new Set(), true);
    expect(new MultiGet(s.host, keys(`get ${other[0]} ${other[1]}`), false, undefined).run()).toBe(true);
    s.places.get(other[0]!)!(new Error("shard 1 stopped"));
    s.places.get(other[1]!)!(0);
    expect(s.events).toEqual(["SERVER_ERROR shard 1 stopped (close)", "END"]);
    const one = stand(new Set(), true);
    getKey(one.host, other[0]!, false, undefined, true, false, false);
    one.places.get(other[0]!)!(new Error("shard 1 stopped"));
    expect(one.events).toEqual(["SERVER_ERROR shard 1 stopped"]);
  });

  it("gat with no key: END alone", () => {
    const s = stand(new Set(), false);
    expect(new MultiGet(s.host, keys("gat 10"), false, 1010).run()).toBe(true);
    expect(s.events).toEqual(["END"]);
  });
});
