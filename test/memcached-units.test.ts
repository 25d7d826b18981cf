/**
 * The pieces of `shardheap memcached` on their own: framing whatever the
 * packets, the item layout in the heap, key ownership, which way the
 * shards share the port on which Node.
 */
import { describe, expect, it } from "vitest";
import { SharedHeap } from "../dist/index.js";
import { HEADER_BYTES, ItemViews, itemSize } from "../dist/apps/memcached/item.js";
import { keyOwner } from "../dist/apps/memcached/key-owner.js";
import { listenMode } from "../dist/apps/memcached/listener.js";
import { parseCommand } from "../dist/apps/memcached/protocol.js";
import { RequestReader, type ReaderSink } from "../dist/apps/memcached/reader.js";

/** A sink that records what the reader hands it, as text. */
function recorder(): { sink: ReaderSink; events: string[] } {
  const events: string[] = [];
  let data = "";
  const sink: ReaderSink = {
    line(text) {
      events.push(`line ${JSON.stringify(text)}`);
      const cmd = parseCommand(text);
      return cmd.kind === "store" ? cmd.bytes + 2 : 0;
    },
    data(chunk, start, end) {
      data += chunk.toString("latin1", start, end);
    },
    dataEnd() {
      events.push(`data ${JSON.stringify(data)}`);
      data = "";
    },
    binary() {
      events.push("binary");
    },
    lineTooLong() {
      events.push("too long");
    },
  };
  return { sink, events };
}

describe("RequestReader", () => {
  const script = Buffer.from("get a b\r\nset k 1 2 5\r\nab\r\nc\r\n\nversion\nset e 0 0 0\r\n\r\nappend x 0 0 3 noreply\r\n\r\n\r\r\ngets z\r\n", "latin1");

  it("hands over the same lines and data blocks wherever the packets split", () => {
    const whole = recorder();
    new RequestReader(whole.sink).push(script);
    expect(whole.events).toEqual([
      'line "get a b"',
      'line "set k 1 2 5"',
      'data "ab\\r\\nc\\r\\n"',
      'line ""',
      'line "version"',
      'line "set e 0 0 0"',
      'data "\\r\\n"',
      'line "append x 0 0 3 noreply"',
      'data "\\r\\n\\r\\r\\n"',
      'line "gets z"',
    ]);
    for (let a = 1; a < script.length; a++) {
      for (const b of [a + 1, a + 3, script.length]) {
        if (b > script.length) continue;
        const split = recorder();
        const reader = new RequestReader(split.sink);
        reader.push(script.subarray(0, a));
        reader.push(script.subarray(a, b));
        reader.push(script.subarray(b));
        expect(split.events, `split at ${a} and ${b}`).toEqual(whole.events);
      }
    }
  });

  it("refuses a line with no end past 2048 bytes unless it is a get, and any line past 1 MiB", () => {
    const r1 = recorder();
    new RequestReader(r1.sink).push(Buffer.from("x".repeat(2049)));
    expect(r1.events).toEqual(["too long"]);
    const r2 = recorder();
    const reader = new RequestReader(r2.sink);
    for (let i = 0; i < 100; i++) reader.push(Buffer.from(i === 0 ? "get " : "key ".repeat(100)));
    expect(r2.events).toEqual([]);
    reader.push(Buffer.from("\r\n"));
    expect(r2.events).toHaveLength(1);
    const r3 = recorder();
    const long = new RequestReader(r3.sink);
    for (let i = 0; i < 300; i++) long.push(Buffer.from(i === 0 ? "get " : "k".repeat(4096)));
    expect(r3.events).toEqual(["too long"]);
  });

  it("recognises the binary protocol by its first byte only", () => {
    const r = recorder();
    new RequestReader(r.sink).push(Buffer.from([0x80, 1, 2]));
    expect(r.events).toEqual(["binary"]);
    const later = recorder();
    new RequestReader(later.sink).push(Buffer.from("version\r\n\x80x\r\n", "latin1"));
    expect(later.events).toEqual(['line "version"', `line ${JSON.stringify("\x80x")}`]);
  });
});

describe("an item in the heap", () => {
  it("is one allocation: header, VALUE line with the key, value, \\r\\n; a get's answer is one view of it", () => {
    const heap = SharedHeap.create({ shards: 1, shardBytes: "1MiB" });
    const shard = heap.shard(0);
    const views = new ItemViews(heap);
    for (const [key, flags, value] of [
      ["k", 0, ""],
      ["a".repeat(250), 4294967295, "x".repeat(70_000)],
      ["mid", 12345, "hello\r\nworld"],
    ] as const) {
      const size = itemSize(key.length, flags, value.length);
      const ptr = shard.malloc(size);
      views.writeHead(ptr, shard.objectSize(ptr), key, flags, 99, value.length);
      views.bytes.write(value, views.dataStart(ptr), "latin1");
      expect(views.terminated(ptr)).toBe(false);
      views.terminate(ptr);
      expect(views.terminated(ptr)).toBe(true);
      expect(views.itemBytes(ptr)).toBe(size);
      expect(size).toBeLessThanOrEqual(views.allocated(ptr));
      expect(views.key(ptr)).toBe(key);
      expect([views.flags(ptr), views.exptime(ptr), views.length(ptr), views.refs(ptr)]).toEqual([flags, 99, value.length, 1]);
      expect(views.getView(ptr, false).toString("latin1")).toBe(`VALUE ${key} ${flags} ${value.length}\r\n${value}\r\n`);
      expect(views.getView(ptr, true).toString("latin1")).toBe(`VALUE ${key} ${flags} ${value.length}\r\n${value}\r\nEND\r\n`);
      views.setCas(ptr, 2 ** 40 + 7);
      expect(views.cas(ptr)).toBe(2 ** 40 + 7);
      expect(`${views.getsLineView(ptr).toString("latin1")} ${views.cas(ptr)}\r\n${views.getsValueView(ptr, true).toString("latin1")}`).toBe(
        `VALUE ${key} ${flags} ${value.length} ${2 ** 40 + 7}\r\n${value}\r\nEND\r\n`,
      );
      expect(views.getView(ptr, true).byteOffset).toBe(ptr + HEADER_BYTES); // a view of the heap, not a copy
      views.acquire(ptr);
      expect(views.release(ptr)).toBe(false);
      expect(views.release(ptr)).toBe(true); // the last reference: its holder frees it
      shard.free(ptr);
    }
    expect(heap.check()).toEqual([]);
    expect(heap.stats(0).liveObjects).toBe(0);
  });
});

describe("keyOwner", () => {
  it("is the same everywhere and spreads keys over the shards", () => {
    expect(keyOwner("anything", 1)).toBe(0);
    const counts = [0, 0, 0, 0];
    for (let i = 0; i < 4000; i++) counts[keyOwner(`key:${i}`, 4)]!++;
    for (const c of counts) expect(c).toBeGreaterThan(800);
    expect(keyOwner("memcached", 7)).toBe(keyOwner("memcached", 7));
  });
});

describe("listenMode", () => {
  it("reusePort from Node 22.12 / 23.1 on Linux, the shared descriptor before and elsewhere on POSIX, one shard on Windows", () => {
    expect(listenMode("20.20.2", "linux")).toBe("sharedFd");
    expect(listenMode("22.11.0", "linux")).toBe("sharedFd");
    expect(listenMode("22.12.0", "linux")).toBe("reusePort");
    expect(listenMode("23.0.0", "linux")).toBe("sharedFd");
    expect(listenMode("23.1.0", "linux")).toBe("reusePort");
    expect(listenMode("24.1.0", "linux")).toBe("reusePort");
    expect(listenMode("24.1.0", "darwin")).toBe("sharedFd");
    expect(listenMode("20.20.2", "win32")).toBe("single");
  });
});
