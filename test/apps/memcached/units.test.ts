/**
 * The pieces of `shardheap memcached` on their own: framing whatever the
 * packets, the item layout in the heap, which way the shards share the
 * port on which Node.
 */
import { describe, expect, it } from "vitest";
import { SharedHeap, SharedMap } from "../../../dist/index.js";
import { HEADER_BYTES, ItemViews, itemSize } from "../../../dist/apps/memcached/store/item.js";
import { listenMode } from "../../../dist/apps/memcached/network/listener.js";
import { parseCommand } from "../../../dist/apps/memcached/protocol/protocol.js";
import { RequestReader, type ReaderSink } from "../../../dist/apps/memcached/protocol/reader.js";
import { itemSizeLimit, startMemcached } from "../../../dist/apps/memcached/server.js";

/** A sink that records what the reader hands it, as text. */
function recorder(): { sink: ReaderSink; events: string[] } {
  const events: string[] = [];
  let data = "";
  const sink: ReaderSink = {
    line(text, bytes) {
      events.push(`line ${JSON.stringify(text)} ${bytes}`);
      const cmd = parseCommand(text, bytes);
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
      'line "get a b" 9',
      'line "set k 1 2 5" 13',
      'data "ab\\r\\nc\\r\\n"',
      'line "" 1',
      'line "version" 8',
      'line "set e 0 0 0" 13',
      'data "\\r\\n"',
      'line "append x 0 0 3 noreply" 24',
      'data "\\r\\n\\r\\r\\n"',
      'line "gets z" 8',
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

  it("suspended by a line, holds what follows (and what arrives meanwhile) and hands it over in order on resume, wherever the packets split", () => {
    const whole = recorder();
    new RequestReader(whole.sink).push(script);
    // Suspend at every storage line, resume after a packet or two has arrived: the same events, in the same order.
    for (let a = 1; a < script.length; a++) {
      for (const b of [a + 1, a + 7, script.length]) {
        if (b > script.length) continue;
        const events: string[] = [];
        let reader!: RequestReader;
        const inner = recorder();
        const sink: ReaderSink = {
          ...inner.sink,
          line(text, bytes) {
            const n = inner.sink.line(text, bytes);
            if (n > 0) reader.suspend();
            return n;
          },
        };
        reader = new RequestReader(sink);
        const pieces = [script.subarray(0, a), script.subarray(a, b), script.subarray(b)];
        for (const p of pieces) {
          reader.push(p);
          // Resume once per piece (a suspension met inside resume waits for the next).
          if (reader.suspended) reader.resume();
        }
        while (reader.suspended) reader.resume();
        events.push(...inner.events);
        expect(events, `split at ${a} and ${b}`).toEqual(whole.events);
      }
    }
    // Nothing is handed over while suspended; stop() drops what was held.
    const r = recorder();
    let reader!: RequestReader;
    reader = new RequestReader({ ...r.sink, line: (t, bytes) => (reader.suspend(), r.sink.line(t, bytes)) });
    reader.push(Buffer.from("set k 0 0 2\r\nok\r\nversion\r\n", "latin1"));
    reader.push(Buffer.from("get k\r\n", "latin1"));
    expect(r.events).toEqual(['line "set k 0 0 2" 13']);
    reader.resume();
    expect(r.events).toEqual(['line "set k 0 0 2" 13', 'data "ok\\r\\n"', 'line "version" 9']);
    reader.stop();
    reader.resume();
    expect(r.events).toHaveLength(3);
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
    expect(later.events).toEqual(['line "version" 9', `line ${JSON.stringify("\x80x")} 4`]);
  });
});

describe("an item in the heap", () => {
  it("is the value of one map entry: header, VALUE line with the key, value, \\r\\n; a get's answer is one view of it, read through any SharedMap object", () => {
    const heap = SharedHeap.create({ shards: 1, shardBytes: "1MiB" });
    const views = new ItemViews(heap);
    const map = SharedMap.create(heap, { shard: 0 });
    const reader = SharedMap.attach(heap, map.handle); // as another shard's connection reads it
    for (const [key, flags, value] of [
      ["k", 0, ""],
      ["a".repeat(250), 4294967295, "x".repeat(70_000)],
      ["mid", 12345, "hello\r\nworld"],
    ] as const) {
      const size = itemSize(key.length, flags, value.length);
      const ref = map.reserve(key, size);
      const ptr = map.valuePointer(ref);
      views.writeHead(ptr, map.entryBytes(ref), key, flags, 99, value.length);
      views.bytes.write(value, views.dataStart(ptr), "latin1");
      expect(views.terminated(ptr)).toBe(false);
      views.terminate(ptr);
      expect(views.terminated(ptr)).toBe(true);
      expect(views.itemBytes(ptr)).toBe(size);
      expect(size).toBeLessThanOrEqual(views.allocated(ptr));
      expect(views.key(ptr)).toBe(key);
      views.setCas(ptr, 2 ** 40 + 7);
      map.publish(ref);
      const got = reader.acquire(key);
      expect(got).not.toBe(0);
      const at = reader.valuePointer(got);
      expect(at).toBe(ptr);
      expect([views.flags(at), views.exptime(at), views.length(at), views.cas(at)]).toEqual([flags, 99, value.length, 2 ** 40 + 7]);
      expect(views.getView(at, false).toString("latin1")).toBe(`VALUE ${key} ${flags} ${value.length}\r\n${value}\r\n`);
      expect(views.getView(at, true).toString("latin1")).toBe(`VALUE ${key} ${flags} ${value.length}\r\n${value}\r\nEND\r\n`);
      expect(`${views.getsLineView(at).toString("latin1")} ${views.cas(at)}\r\n${views.getsValueView(at, true).toString("latin1")}`).toBe(
        `VALUE ${key} ${flags} ${value.length} ${2 ** 40 + 7}\r\n${value}\r\nEND\r\n`,
      );
      expect(views.getView(at, true).byteOffset).toBe(ptr + HEADER_BYTES); // a view of the heap, not a copy
      // Unlinked while the reader holds it: the bytes stay until it lets go.
      expect(map.delete(key)).toBe(true);
      map.reclaim();
      expect(views.getView(at, true).toString("latin1")).toBe(`VALUE ${key} ${flags} ${value.length}\r\n${value}\r\nEND\r\n`);
      expect(map.stats().unlinkedHeld + map.stats().retired).toBe(1);
      reader.release(got);
      map.reclaim();
      expect(map.stats()).toMatchObject({ entries: 0, held: 0, unlinkedHeld: 0, retired: 0 });
    }
    expect(map.check()).toEqual([]);
    reader.close();
    map.destroy();
    expect(heap.check()).toEqual([]);
    expect(heap.stats(0).liveObjects).toBe(0);
  });
});

describe("the item size limit", () => {
  it("is at most half a shard's memory, as memcached's -I is of -m; the default 1 MiB shrinks to that, a limit given is refused past it", async () => {
    expect(itemSizeLimit(undefined, 64 << 20, "maxItemSize", "memoryPerShard")).toBe(1 << 20);
    expect(itemSizeLimit(undefined, 1 << 20, "maxItemSize", "memoryPerShard")).toBe(512 << 10);
    expect(itemSizeLimit(512 << 10, 1 << 20, "maxItemSize", "memoryPerShard")).toBe(512 << 10);
    expect(() => itemSizeLimit((512 << 10) + 1, 1 << 20, "--max-item-size", "--memory")).toThrow(/^--max-item-size \(\S+\) must be at most half of --memory \(1M per shard\)/);
    // startMemcached refuses before starting anything.
    const e = await startMemcached({ shards: 1, memoryPerShard: "1MiB", maxItemSize: 2 << 20, port: 0 }).catch((x: unknown) => x);
    expect(e).toMatchObject({ name: "InvalidValueError", code: "ERR_SHARDHEAP_INVALID_VALUE", field: "maxItemSize" });
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
