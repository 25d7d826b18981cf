/**
 * The shared table of the ports the shards listen on (src/smp/
 * listen-table.ts), on one thread: which listen binds and which joins,
 * port 0's one-port-per-nth rule, a port asked by number finding a port-0
 * listen's, members leaving (the last frees the entry), a descriptor
 * checked against the socket's identity, and a dead shard's entries
 * (as a member, or as the binder others wait for) let go.
 */
import { describe, expect, it } from "vitest";
import { ListenTable, MAX_PORTS, createListenTable, type PortKey } from "../../dist/smp/listen-table.js";

const SHARDS = 3;
const key = (port: number, nth = 0, address = "127.0.0.1"): PortKey => ({ family: 4, address, port, nth });
const table = (): ListenTable => new ListenTable(createListenTable(SHARDS), SHARDS);

describe("ListenTable", () => {
  it("the first listen claims the port for binding, the others wait, then join a member's descriptor; the last to leave frees it", () => {
    const t = table();
    const first = t.findOrClaim(key(8080), 0);
    expect(first.kind).toBe("claimed");
    const entry = (first as { entry: number }).entry;
    expect(t.findOrClaim(key(8080), 1)).toEqual({ kind: "binding" });
    const g = t.generation();
    t.opened(entry, 0, 17, 8080, "8:1234");
    expect(t.generation()).toBe(g + 1);
    expect(t.findOrClaim(key(8080), 1)).toEqual({ kind: "open", open: { entry, port: 8080, identity: "8:1234", memberFd: 17 } });
    expect(t.join(entry, 1, 21, "8:9999")).toBe(false); // a descriptor of another socket
    expect(t.join(entry, 1, 21, "8:1234")).toBe(true);
    expect(t.join(entry, 1, 22, "8:1234")).toBe(false); // a member already
    expect([0, 1, 2].map((s) => t.isMember(entry, s))).toEqual([true, true, false]);
    t.leave(entry, 0);
    expect(t.findOrClaim(key(8080), 2)).toMatchObject({ kind: "open", open: { memberFd: 21 } });
    t.leave(entry, 1);
    expect(t.findOrClaim(key(8080), 2)).toEqual({ kind: "claimed", entry });
  });

  it("port 0: the nth port-0 listen of every shard shares one entry; a port asked by number finds the port-0 listen that got it; addresses apart", () => {
    const t = table();
    const a = t.findOrClaim(key(0, 0), 0) as { entry: number };
    t.opened(a.entry, 0, 10, 40001, "8:1");
    const b = t.findOrClaim(key(0, 1), 0) as { entry: number };
    expect(b.entry).not.toBe(a.entry);
    t.opened(b.entry, 0, 11, 40002, "8:2");
    expect(t.findOrClaim(key(0, 0), 1)).toMatchObject({ kind: "open", open: { port: 40001 } });
    expect(t.findOrClaim(key(0, 1), 1)).toMatchObject({ kind: "open", open: { port: 40002 } });
    expect(t.findOrClaim(key(40002), 2)).toMatchObject({ kind: "open", open: { entry: b.entry } });
    expect(t.findOrClaim(key(40001, 0, "::1"), 2).kind).toBe("claimed"); // another address: another socket
    expect(t.findOrClaim({ family: 0, address: "", port: 40001, nth: 0 }, 2).kind).toBe("claimed"); // every address
  });

  it("a dead shard leaves the entries it was a member of, and frees one it was binding (those waiting bind themselves)", () => {
    const t = table();
    const open = t.findOrClaim(key(9000), 0) as { entry: number };
    t.opened(open.entry, 0, 30, 9000, "8:3");
    expect(t.join(open.entry, 2, 31, "8:3")).toBe(true);
    const binding = t.findOrClaim(key(9001), 2) as { entry: number };
    expect(t.findOrClaim(key(9001), 1)).toEqual({ kind: "binding" });
    t.forgetShard(2);
    expect(t.isMember(open.entry, 2)).toBe(false);
    expect(t.isMember(open.entry, 0)).toBe(true);
    expect(t.findOrClaim(key(9001), 1)).toEqual({ kind: "claimed", entry: binding.entry });
  });

  it(`holds ${MAX_PORTS} ports at once; the next is "full" until one is freed`, () => {
    const t = table();
    const entries = Array.from({ length: MAX_PORTS }, (_, i) => (t.findOrClaim(key(10_000 + i), 0) as { entry: number }).entry);
    expect(new Set(entries).size).toBe(MAX_PORTS);
    expect(t.findOrClaim(key(20_000), 0)).toEqual({ kind: "full" });
    t.abandon(entries[5]!);
    expect(t.findOrClaim(key(20_000), 0)).toEqual({ kind: "claimed", entry: entries[5] });
  });
});
