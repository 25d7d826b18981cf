/**
 * Every message heap.check() can give, each provoked on an idle heap by
 * writing buffer words by hand (the slots of src/memory/layout.ts, through
 * the region's accessors), and expected exactly: the whole list of
 * violations, which is the message asked for plus, where the corruption
 * cannot help it, the consequences named in the case.
 *
 * The messages are read from the checker's source (src/memory/check.ts,
 * and checkHeader in src/memory/shared-heap.ts, which SharedHeap.check
 * runs first), so a message added there without a case here fails the
 * suite, and so does a case whose message is gone.
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { HeapFormatError, SharedHeap } from "../../src/index.js";
import {
  HEAP_HEADER_BYTES,
  HEAP_VERSION,
  H_MAGIC0,
  H_PAGE_SIZE,
  H_FLAGS,
  H_PROF_SITES,
  H_SHARDS,
  H_SHARD_PAGES,
  H_VERSION,
  PAGE_FREE,
  PAGE_INNER,
  PAGE_POOL,
  PM_FREELIST,
  PM_HEAD,
  PM_NEXT,
  PM_PREV,
  PM_SITE,
  PM_SPAN_PAGES,
  PM_STATE,
  PM_USED,
  P_CAPACITY,
  P_CLAIMED_HEAD,
  P_FREE_COUNT,
  P_FREE_HEAD,
  P_MALLOCS_LO,
  P_PAGES_IN_USE,
  P_SPAN_FREE,
  P_SPAN_LIST,
  S_FREE_PAGES,
  S_QUARANTINE_BYTES,
  S_QUARANTINE_HEAD,
  S_QUARANTINE_OBJECTS,
  S_QUARANTINE_TAIL,
  S_QUARANTINE_WRITTEN,
  S_SPAN_BITMAP,
  S_SPAN_SUMMARY,
  dataPagesFor,
  maxProfilerSites,
} from "../../src/memory/layout.js";
import { allocatePageSpan, spanListMinPages, spanListOf } from "../../src/memory/page-spans.js";
import type { ShardRegion } from "../../src/memory/region.js";
import { MIN_SHARD_BYTES } from "../../src/memory/shared-heap.js";
import { SAMPLED_POOL_BASE, classFallbackSpanPages, classOf, classSpanPages, objectsPerSpan, poolStride } from "../../src/memory/size-classes.js";
import { poolRecord, sampledTagIndex } from "../../src/memory/small-pool.js";
import { LINK_CHECK } from "../../src/memory/quarantine.js";

// ---------------------------------------------------------------------------
// The messages, from the source.

const source = (path: string): string => readFileSync(new URL(`../../${path}`, import.meta.url), "utf8");

/** A placeholder of a message shape: what `${...}` stood for. */
const HOLE = "…";

/**
 * Scan `code` from `i` to the `close` character at depth 0 (or the end),
 * skipping comments, and push the shape of each string or template literal
 * met at this level onto `found` (null: collect nothing, as inside a
 * placeholder). Returns the index after `close`.
 */
function scan(code: string, i: number, close: string | undefined, found: string[] | null): number {
  let depth = 0;
  while (i < code.length) {
    const c = code[i]!;
    if (c === "/" && code[i + 1] === "/") i = code.indexOf("\n", i) < 0 ? code.length : code.indexOf("\n", i);
    else if (c === "/" && code[i + 1] === "*") i = code.indexOf("*/", i + 2) + 2;
    else if (c === '"' || c === "'") {
      let text = "";
      for (i++; code[i] !== c; i++) text += code[i] === "\\" ? code[++i] : code[i];
      i++;
      found?.push(text);
    } else if (c === "`") {
      let text = "";
      for (i++; code[i] !== "`"; ) {
        if (code[i] === "\\") {
          text += code[i + 1];
          i += 2;
        } else if (code[i] === "$" && code[i + 1] === "{") {
          i = scan(code, i + 2, "}", null);
          text += HOLE;
        } else text += code[i++];
      }
      i++;
      found?.push(text);
    } else {
      if (c === "{" || c === "(" || c === "[") depth++;
      else if (depth === 0 && c === close) return i + 1;
      else if (c === "}" || c === ")" || c === "]") depth--;
      i++;
    }
  }
  return i;
}

function literalShapes(code: string): string[] {
  const found: string[] = [];
  scan(code.replace(/^import [\s\S]*?;$/gm, ""), 0, undefined, found);
  return found;
}

/** The body of `function name(...) {...}` in `code`. */
function functionBody(code: string, name: string): string {
  const at = code.indexOf(`function ${name}(`);
  expect(at, `function ${name} in the source`).toBeGreaterThanOrEqual(0);
  const open = code.indexOf("{", scan(code, code.indexOf("(", at) + 1, ")", null));
  return code.slice(open + 1, scan(code, open + 1, "}", null) - 1);
}

const CHECK_SOURCE = source("src/memory/check.ts");
/**
 * Literals of check.ts that are not messages: checkRegion's fail() puts
 * "shard N: " before each of its messages with this template.
 */
const NOT_MESSAGES = new Set([`shard ${HOLE}: ${HOLE}`]);
const CHECK_MESSAGES = literalShapes(CHECK_SOURCE).filter((s) => !NOT_MESSAGES.has(s));
const HEADER_MESSAGES = ["checkHeader", "headerProblem"].flatMap((name) => literalShapes(functionBody(source("src/memory/shared-heap.ts"), name)));
/** Where forEachChained (cross-shard.ts) says a chain is, in check's chain messages. */
const CHAIN_PLACES = literalShapes(functionBody(source("src/memory/cross-shard.ts"), "forEachChained"));

const escape = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
/** The message shape as a pattern; check.ts's region messages carry a "shard N: " prefix. */
const pattern = (shape: string): RegExp => new RegExp(`^(?:shard \\d+: )?${shape.split(HOLE).map(escape).join("(.+?)")}$`);
const literalLength = (shape: string): number => shape.replaceAll(HOLE, "").length;
/**
 * The shapes `message` is an instance of that say the most ("shard …: … is
 * corrupt at …" also matches "class 64: pool free list is corrupt at 8";
 * the more literal text, the more specific). One, unless two messages of
 * the checker cannot be told apart.
 */
function shapesOf(message: string): string[] {
  const matching = [...CHECK_MESSAGES, ...HEADER_MESSAGES].filter((s) => pattern(s).test(message));
  const most = Math.max(...matching.map(literalLength));
  return matching.filter((s) => literalLength(s) === most);
}

// ---------------------------------------------------------------------------
// Corruption tools: word indices, never the allocator's own code paths.

const MiB = 1 << 20;
const C64 = classOf[64 >>> 3]!;
const C1280 = classOf[1280 >>> 3]!;
const C16384 = classOf[16384 >>> 3]!;
const SITE_NONE = 0xffffff; // a tag naming site 0xfffffe, never recorded

const metaIndex = (r: ShardRegion, page: number, field: number): number => r.pageMeta(page) + field;
const setLive = (r: ShardRegion, ptr: number): void => void (r.i32[r.liveWord(ptr)] |= r.liveBit(ptr));
const clearLive = (r: ShardRegion, ptr: number): void => void (r.i32[r.liveWord(ptr)] &= ~r.liveBit(ptr));
const setPending = (r: ShardRegion, ptr: number): void => void (r.i32[r.pendingWord(ptr)] |= r.liveBit(ptr));
const clearPending = (r: ShardRegion, ptr: number): void => void (r.i32[r.pendingWord(ptr)] &= ~r.liveBit(ptr));
const link = (r: ShardRegion, obj: number): number => r.u32[obj >>> 2]!;
/** The objects of a list linked through their first words, from `head`. */
function listFrom(r: ShardRegion, head: number): number[] {
  const objects: number[] = [];
  for (let obj = head; obj !== 0; obj = link(r, obj)) objects.push(obj);
  return objects;
}
const poolSlot = (r: ShardRegion, cls: number, slot: number): number => poolRecord(r, cls) + slot;
/** The free-span list that holds a fresh region's one free span (all its pages). */
const freshListOfAll = (r: ShardRegion): number => spanListOf(r.dataPages);

/**
 * Make pages [head, head + pages) of `r` a pool span of `cls` that is
 * consistent with an otherwise empty pool: every object on the span's own
 * freelist, the pool's record counting the span. Pages come from the page
 * allocator (allocatePageSpan), so the free lists stay right.
 */
function forgePoolSpan(r: ShardRegion, cls: number, pages: number, classByte = cls + 1): number {
  const head = allocatePageSpan(r, pages, false);
  for (let p = head; p < head + pages; p++) {
    r.i32[metaIndex(r, p, PM_STATE)] = PAGE_POOL;
    r.i32[metaIndex(r, p, PM_HEAD)] = head;
    r.u8[r.classMap + p] = classByte;
  }
  const perSpan = objectsPerSpan(cls, pages);
  const start = r.pageAddress(head);
  const size = poolStride[cls]!;
  for (let k = 0; k < perSpan; k++) r.u32[(start + k * size) >>> 2] = k + 1 < perSpan ? start + (k + 1) * size : 0;
  r.i32[metaIndex(r, head, PM_SPAN_PAGES)] = pages;
  r.u32[metaIndex(r, head, PM_FREELIST)] = start;
  r.i32[metaIndex(r, head, PM_USED)] = 0;
  r.i32[metaIndex(r, head, PM_NEXT)] = -1;
  r.i32[metaIndex(r, head, PM_PREV)] = -1;
  if (classByte === cls + 1) {
    r.i32[poolSlot(r, cls, P_SPAN_LIST)] = head;
    r.i32[poolSlot(r, cls, P_CAPACITY)] = perSpan;
    r.i32[poolSlot(r, cls, P_SPAN_FREE)] = perSpan;
    r.i32[poolSlot(r, cls, P_PAGES_IN_USE)] = pages;
  }
  return head;
}

// ---------------------------------------------------------------------------
// The cases.

interface Case {
  /** The message shape, as enumerated from the source. */
  readonly shape: string;
  /** What is corrupted (and what else the expected list holds, and why). */
  readonly what: string;
  readonly shards?: number;
  /** Made with debug pointers (the quarantine's messages). */
  readonly debugPointers?: boolean;
  /**
   * Bring the heap to the state to corrupt, with the allocator (check() is
   * then [], asserted), and return the corruption: it writes words and
   * returns the exact list check() must give.
   */
  readonly arrange: (heap: SharedHeap) => () => string[];
}

const stuck = (ptr: number): string => `shard 0: object ${ptr} is pending a cross-shard free but no inbox or outbox holds it (its free was lost)`;

const CASES: readonly Case[] = [
  // --- Cross-shard chains (checkRegions).
  {
    shape: `shard ${HOLE}: object ${HOLE} is in two cross-shard chains`,
    what: "an object shard 1 pushed onto shard 0's inbox is also written into shard 1's outbox slot for shard 0",
    shards: 2,
    arrange: (heap) => {
      const x = heap.shard(0).malloc(64);
      heap.shard(1).free(x);
      return () => {
        const r1 = heap.regions[1]!;
        r1.u32[r1.outboxSlots + 0] = x;
        return [`shard 0: object ${x} is in two cross-shard chains`];
      };
    },
  },
  {
    shape: `shard ${HOLE}: ${HOLE} holds ${HOLE}, which is not a live object pending free`,
    what: "shard 0's inbox head set to a live object nobody freed (its link word 0)",
    shards: 2,
    arrange: (heap) => {
      const y = heap.shard(0).malloc(64);
      return () => {
        const r0 = heap.regions[0]!;
        r0.u32[y >>> 2] = 0;
        r0.u32[r0.inbox] = y;
        return [`shard 0: cross-shard inbox holds ${y}, which is not a live object pending free`];
      };
    },
  },
  {
    shape: `shard ${HOLE}: ${HOLE} holds ${HOLE}, which is not a live object pending free`,
    what: "shard 1's outbox slot for shard 0 set to a live object of shard 0 nobody freed",
    shards: 2,
    arrange: (heap) => {
      const y = heap.shard(0).malloc(64);
      return () => {
        const r1 = heap.regions[1]!;
        r1.u32[y >>> 2] = 0;
        r1.u32[r1.outboxSlots + 0] = y;
        return [`shard 0: shard 1's outbox holds ${y}, which is not a live object pending free`];
      };
    },
  },
  {
    shape: `shard ${HOLE}: ${HOLE} is corrupt at ${HOLE}`,
    what: "shard 0's inbox head set to 8 (inside the heap header, outside every region)",
    shards: 2,
    arrange: (heap) => () => {
      const r0 = heap.regions[0]!;
      r0.u32[r0.inbox] = 8;
      return ["shard 0: cross-shard inbox is corrupt at 8"];
    },
  },
  {
    shape: `shard ${HOLE}: ${HOLE} is corrupt at ${HOLE}`,
    what: "shard 1's outbox slot for shard 0 set to a pointer 4 bytes past shard 0's first page (not 8-aligned)",
    shards: 2,
    arrange: (heap) => () => {
      const r1 = heap.regions[1]!;
      const bad = heap.regions[0]!.dataStart + 4;
      r1.u32[r1.outboxSlots + 0] = bad;
      return [`shard 0: shard 1's outbox is corrupt at ${bad}`];
    },
  },

  // --- The page walk: spans tile the region.
  {
    shape: `page ${HOLE} should head a span but has state ${HOLE}, length ${HOLE}`,
    what: "page 0 of a fresh shard (the head of its one free span) marked PAGE_INNER; the walk stops there",
    arrange: (heap) => () => {
      const r = heap.regions[0]!;
      r.i32[metaIndex(r, 0, PM_STATE)] = PAGE_INNER;
      return [`shard 0: page 0 should head a span but has state ${PAGE_INNER}, length ${r.dataPages}`];
    },
  },
  {
    shape: `page ${HOLE} has unknown state ${HOLE}`,
    what: "page 0 of a fresh shard given state 9; the walk stops there",
    arrange: (heap) => () => {
      const r = heap.regions[0]!;
      r.i32[metaIndex(r, 0, PM_STATE)] = 9;
      return ["shard 0: page 0 has unknown state 9"];
    },
  },
  {
    shape: `free spans at pages ${HOLE} and ${HOLE} touch but were not merged`,
    what: "pages 0-2 taken from the fresh free span and put back as a free span of their own, listed in list 3 with its bitmap bits and the free-page count, but not merged with pages 3.. (everything else about both spans is right)",
    arrange: (heap) => () => {
      const r = heap.regions[0]!;
      expect(allocatePageSpan(r, 3, false)).toBe(0);
      r.i32[metaIndex(r, 0, PM_STATE)] = PAGE_FREE;
      r.i32[metaIndex(r, 0, PM_SPAN_PAGES)] = 3;
      r.i32[metaIndex(r, 0, PM_NEXT)] = -1;
      r.i32[metaIndex(r, 0, PM_PREV)] = -1;
      r.i32[metaIndex(r, 2, PM_HEAD)] = 0;
      expect(r.i32[r.spanLists + 3]).toBe(-1);
      r.i32[r.spanLists + 3] = 0;
      r.i32[r.hdr + S_SPAN_BITMAP] |= 1 << 3;
      r.i32[r.hdr + S_SPAN_SUMMARY] |= 1;
      r.i32[r.hdr + S_FREE_PAGES] += 3;
      return ["shard 0: free spans at pages 0 and 3 touch but were not merged"];
    },
  },
  {
    shape: `free span at page ${HOLE}: its last page ${HOLE} names head ${HOLE}`,
    what: "the boundary tag (PM_HEAD of the last page) of a fresh shard's free span set to 7",
    arrange: (heap) => () => {
      const r = heap.regions[0]!;
      const last = r.dataPages - 1;
      r.i32[metaIndex(r, last, PM_HEAD)] = 7;
      return [`shard 0: free span at page 0: its last page ${last} names head 7`];
    },
  },
  {
    shape: `page ${HOLE} inside free span ${HOLE} is marked ${HOLE}`,
    what: "page 5, inside a fresh shard's free span, marked PAGE_POOL",
    arrange: (heap) => () => {
      const r = heap.regions[0]!;
      r.i32[metaIndex(r, 5, PM_STATE)] = PAGE_POOL;
      return [`shard 0: page 5 inside free span 0 is marked ${PAGE_POOL}`];
    },
  },
  {
    shape: `free span at page ${HOLE} has live or pending bits set`,
    what: "a pending bit set at byte 64 of free page 4",
    arrange: (heap) => () => {
      const r = heap.regions[0]!;
      setPending(r, r.pageAddress(4) + 64);
      return ["shard 0: free span at page 0 has live or pending bits set"];
    },
  },
  {
    shape: `large span at page ${HOLE} names pool ${HOLE}`,
    what: "the class-map byte of a live large object's head page set to 1 (pool 0)",
    arrange: (heap) => {
      const x = heap.shard(0).malloc(20000);
      return () => {
        const r = heap.regions[0]!;
        r.u8[r.classMap + r.pageOf(x)] = 1;
        return [`shard 0: large span at page ${r.pageOf(x)} names pool 0`];
      };
    },
  },
  {
    shape: `page ${HOLE} inside large span ${HOLE} is marked ${HOLE}`,
    what: "the third page of a live 5-page object marked PAGE_FREE",
    arrange: (heap) => {
      const x = heap.shard(0).malloc(20000);
      return () => {
        const r = heap.regions[0]!;
        const head = r.pageOf(x);
        r.i32[metaIndex(r, head + 2, PM_STATE)] = PAGE_FREE;
        return [`shard 0: page ${head + 2} inside large span ${head} is marked ${PAGE_FREE}`];
      };
    },
  },
  {
    shape: `large span at page ${HOLE} is used but its object is not live`,
    what: "a live large object's live bit cleared (its span still counted live: the counters agree)",
    arrange: (heap) => {
      const x = heap.shard(0).malloc(20000);
      return () => {
        const r = heap.regions[0]!;
        clearLive(r, x);
        return [`shard 0: large span at page ${r.pageOf(x)} is used but its object is not live`];
      };
    },
  },
  {
    shape: `object ${HOLE} is pending a cross-shard free but no inbox or outbox holds it (its free was lost)`,
    what: "a live large object's pending bit set, as if a remote free claimed it and never pushed it",
    arrange: (heap) => {
      const x = heap.shard(0).malloc(20000);
      return () => {
        setPending(heap.regions[0]!, x);
        return [stuck(x)];
      };
    },
  },
  {
    shape: `object ${HOLE} is pending a cross-shard free but no inbox or outbox holds it (its free was lost)`,
    what: "a live 64-byte object's pending bit set, as if a remote free claimed it and never pushed it",
    arrange: (heap) => {
      const p = heap.shard(0).malloc(64);
      return () => {
        setPending(heap.regions[0]!, p);
        return [stuck(p)];
      };
    },
  },
  {
    shape: `large span at page ${HOLE} has a bad site tag ${HOLE}`,
    what: "a large object's site tag (PM_SITE) set to a site never recorded",
    arrange: (heap) => {
      const x = heap.shard(0).malloc(20000);
      return () => {
        const r = heap.regions[0]!;
        r.i32[metaIndex(r, r.pageOf(x), PM_SITE)] = SITE_NONE;
        return [`shard 0: large span at page ${r.pageOf(x)} has a bad site tag ${SITE_NONE}`];
      };
    },
  },
  {
    shape: `large span at page ${HOLE} has live bits inside the object`,
    what: "a live bit set one page into a live large object",
    arrange: (heap) => {
      const x = heap.shard(0).malloc(20000);
      return () => {
        const r = heap.regions[0]!;
        setLive(r, x + 4096);
        return [`shard 0: large span at page ${r.pageOf(x)} has live bits inside the object`];
      };
    },
  },
  {
    shape: `free pages counter ${HOLE} but free spans hold ${HOLE}`,
    what: "S_FREE_PAGES of a fresh shard raised by 1",
    arrange: (heap) => () => {
      const r = heap.regions[0]!;
      r.i32[r.hdr + S_FREE_PAGES] += 1;
      return [`shard 0: free pages counter ${r.dataPages + 1} but free spans hold ${r.dataPages}`];
    },
  },

  // --- Free-span lists and their bitmap.
  {
    shape: `free-span list ${HOLE} is corrupt at page ${HOLE}`,
    what: "the head of empty list 1 set to a page past the region's last",
    arrange: (heap) => () => {
      const r = heap.regions[0]!;
      r.i32[r.spanLists + 1] = r.dataPages + 5;
      return [`shard 0: free-span list 1 is corrupt at page ${r.dataPages + 5}`];
    },
  },
  {
    shape: `free-span list ${HOLE} (spans of ${HOLE} pages or more) holds page ${HOLE}, not a free span it lists`,
    what: "the head of the list holding a fresh shard's free span set to page 3, an inner page of that span (its links -1): one entry still, so the counts agree",
    arrange: (heap) => () => {
      const r = heap.regions[0]!;
      const list = freshListOfAll(r);
      r.i32[r.spanLists + list] = 3;
      r.i32[metaIndex(r, 3, PM_NEXT)] = -1;
      r.i32[metaIndex(r, 3, PM_PREV)] = -1;
      return [`shard 0: free-span list ${list} (spans of ${spanListMinPages(list)} pages or more) holds page 3, not a free span it lists`];
    },
  },
  {
    shape: `free-span list ${HOLE} (spans of ${HOLE} pages or more) holds page ${HOLE}, not a free span it lists`,
    what: "a fresh shard's free span moved (head, bitmap bit) to the list one below its own, in the same bitmap word",
    arrange: (heap) => () => {
      const r = heap.regions[0]!;
      const list = freshListOfAll(r);
      const wrong = list - 1;
      expect(wrong >>> 5).toBe(list >>> 5);
      r.i32[r.spanLists + wrong] = 0;
      r.i32[r.spanLists + list] = -1;
      r.i32[r.hdr + S_SPAN_BITMAP + (list >>> 5)] ^= (1 << (list & 31)) | (1 << (wrong & 31));
      return [`shard 0: free-span list ${wrong} (spans of ${spanListMinPages(wrong)} pages or more) holds page 0, not a free span it lists`];
    },
  },
  {
    shape: `free-span list ${HOLE}: page ${HOLE} has back link ${HOLE}, expected ${HOLE}`,
    what: "the back link (PM_PREV) of a list's only span set to 7",
    arrange: (heap) => () => {
      const r = heap.regions[0]!;
      r.i32[metaIndex(r, 0, PM_PREV)] = 7;
      return [`shard 0: free-span list ${freshListOfAll(r)}: page 0 has back link 7, expected -1`];
    },
  },
  {
    shape: `free-span list ${HOLE}: bitmap bit ${HOLE} but the list has ${HOLE} spans`,
    what: "the bitmap bit of an empty list set, in the word that already has a bit set (so the summary stays right)",
    arrange: (heap) => () => {
      const r = heap.regions[0]!;
      const empty = freshListOfAll(r) ^ 1;
      r.i32[r.hdr + S_SPAN_BITMAP + (empty >>> 5)] |= 1 << (empty & 31);
      return [`shard 0: free-span list ${empty}: bitmap bit set but the list has 0 spans`];
    },
  },
  {
    shape: `free-span bitmap word ${HOLE}: summary bit disagrees with the word`,
    what: "the summary bit of bitmap word 8 (lists 256-287, all empty) set",
    arrange: (heap) => () => {
      const r = heap.regions[0]!;
      expect(freshListOfAll(r) >>> 5).not.toBe(8);
      r.i32[r.hdr + S_SPAN_SUMMARY] |= 1 << 8;
      return ["shard 0: free-span bitmap word 8: summary bit disagrees with the word"];
    },
  },
  {
    shape: `${HOLE} free spans but ${HOLE} listed`,
    what: "of two free spans (a large object freed beside a live one), the 5-page one taken off list 5 with its bitmap and summary bits: the list is then consistent in itself, only the count of listed spans is short",
    arrange: (heap) => {
      const a = heap.shard(0);
      const first = a.malloc(20000);
      a.malloc(20000);
      a.free(first);
      return () => {
        const r = heap.regions[0]!;
        expect(r.i32[r.spanLists + 5]).toBe(r.pageOf(first));
        expect(r.i32[r.hdr + S_SPAN_BITMAP]).toBe(1 << 5);
        r.i32[r.spanLists + 5] = -1;
        r.i32[r.hdr + S_SPAN_BITMAP] = 0;
        r.i32[r.hdr + S_SPAN_SUMMARY] &= ~1;
        return ["shard 0: 2 free spans but 1 listed"];
      };
    },
  },

  // --- Pool spans.
  {
    shape: `pool span at page ${HOLE} names class ${HOLE}`,
    what: "a page taken from the page allocator and marked a 1-page pool span whose class-map byte says no class (-1); no pool counts it",
    arrange: (heap) => () => {
      const r = heap.regions[0]!;
      const head = forgePoolSpan(r, C16384, 1, 0);
      return [`shard 0: pool span at page ${head} names class -1`];
    },
  },
  {
    shape: `pool span at page ${HOLE} has ${HOLE} pages, class ${HOLE} uses ${HOLE} or ${HOLE}`,
    what: `a pool span of the 16 KiB class forged with 5 pages (the class uses 4), its one object on its freelist, the pool's record counting it (the same forgery with 4 pages checks clean: see the control test)`,
    arrange: (heap) => () => {
      const r = heap.regions[0]!;
      const head = forgePoolSpan(r, C16384, 5);
      return [`shard 0: pool span at page ${head} has 5 pages, class ${C16384} uses ${classSpanPages[C16384]} or ${classFallbackSpanPages[C16384]}`];
    },
  },
  {
    shape: `page ${HOLE} of pool span ${HOLE} disagrees about its pool or head`,
    what: "the third page of a 5-page span of the 1280-byte class marked PAGE_INNER",
    arrange: (heap) => {
      const p = heap.shard(0).malloc(1280);
      return () => {
        const r = heap.regions[0]!;
        const head = r.pageOf(p);
        expect(r.i32[metaIndex(r, head, PM_SPAN_PAGES)]).toBe(classSpanPages[C1280]);
        r.i32[metaIndex(r, head + 2, PM_STATE)] = PAGE_INNER;
        return [`shard 0: page ${head + 2} of pool span ${head} disagrees about its pool or head`];
      };
    },
  },
  {
    shape: `pool span at page ${HOLE}: live or pending bit at ${HOLE}, inside a ${HOLE}-byte object`,
    what: "a pending bit set 8 bytes into a live 64-byte object; also expected: the sweep of free granules with a pending bit reports the same stray bit as not on the claimed list",
    arrange: (heap) => {
      const p = heap.shard(0).malloc(64);
      return () => {
        const r = heap.regions[0]!;
        setPending(r, p + 8);
        return [
          `shard 0: pool span at page ${r.pageOf(p)}: live or pending bit at ${p + 8}, inside a 64-byte object`,
          `shard 0: class 64: free object ${p + 8} has a pending bit but is not on the claimed list`,
        ];
      };
    },
  },
  {
    shape: `class ${HOLE}: span ${HOLE}'s freelist is corrupt at ${HOLE}`,
    what: "after trim() put 63 free 64-byte objects back on their span's freelist, the link of its last object set to the one live object (the 63 are still counted, so the span's sum holds)",
    arrange: (heap) => {
      const a = heap.shard(0);
      const p = a.malloc(64);
      a.free(a.malloc(64));
      a.trim();
      return () => {
        const r = heap.regions[0]!;
        const span = r.pageOf(p);
        const own = listFrom(r, r.u32[metaIndex(r, span, PM_FREELIST)]!);
        expect(own.length).toBe(63);
        r.u32[own.at(-1)! >>> 2] = p;
        return [`shard 0: class 64: span ${span}'s freelist is corrupt at ${p}`];
      };
    },
  },
  {
    shape: `class ${HOLE}: span ${HOLE} has ${HOLE} used + ${HOLE} free != ${HOLE} objects`,
    what: "PM_USED of a 64-byte span raised by 1; also expected, since the pool's sums read the spans' used counts: the span-free count and the used - cached = live equation disagree",
    arrange: (heap) => {
      const p = heap.shard(0).malloc(64);
      return () => {
        const r = heap.regions[0]!;
        const span = r.pageOf(p);
        r.i32[metaIndex(r, span, PM_USED)] += 1;
        return [
          `shard 0: class 64: span ${span} has 65 used + 0 free != 64 objects`,
          "shard 0: class 64: span-free count 0 disagrees with spans",
          "shard 0: class 64: 65 used - 63 cached != 1 live objects",
        ];
      };
    },
  },
  {
    shape: `class ${HOLE}: sampled object ${HOLE} has a bad site tag ${HOLE}`,
    what: "with every allocation sampled, a 64-byte object's site tag (after its span's objects) set to a site never recorded",
    arrange: (heap) => {
      const a = heap.shard(0);
      a.setHeapProfilingSampleRate(1);
      const p = a.malloc(64);
      return () => {
        const r = heap.regions[0]!;
        r.i32[sampledTagIndex(r, p, SAMPLED_POOL_BASE + C64)] = SITE_NONE;
        return [`shard 0: class 64: sampled object ${p} has a bad site tag ${SITE_NONE}`];
      };
    },
  },
  {
    shape: `class ${HOLE}: capacity ${HOLE}, spans hold ${HOLE}`,
    what: "P_CAPACITY of the 64-byte pool raised by 1",
    arrange: (heap) => {
      heap.shard(0).malloc(64);
      return () => {
        heap.regions[0]!.i32[poolSlot(heap.regions[0]!, C64, P_CAPACITY)] += 1;
        return ["shard 0: class 64: capacity 65, spans hold 64"];
      };
    },
  },
  {
    shape: `class ${HOLE}: pages in use ${HOLE}, spans hold ${HOLE}`,
    what: "P_PAGES_IN_USE of the 64-byte pool raised by 1",
    arrange: (heap) => {
      heap.shard(0).malloc(64);
      return () => {
        heap.regions[0]!.i32[poolSlot(heap.regions[0]!, C64, P_PAGES_IN_USE)] += 1;
        return ["shard 0: class 64: pages in use 2, spans hold 1"];
      };
    },
  },
  {
    shape: `class ${HOLE}: pool free list is corrupt at ${HOLE}`,
    what: "the link of the last object on the 64-byte pool's clean list set to the live object (the 63 before it are counted, so the free count holds)",
    arrange: (heap) => {
      const p = heap.shard(0).malloc(64);
      return () => {
        const r = heap.regions[0]!;
        const clean = listFrom(r, r.u32[poolSlot(r, C64, P_FREE_HEAD)]!);
        expect(clean.length).toBe(63);
        r.u32[clean.at(-1)! >>> 2] = p;
        return [`shard 0: class 64: pool free list is corrupt at ${p}`];
      };
    },
  },
  {
    shape: `class ${HOLE}: free object ${HOLE} on the clean list has its pending bit set`,
    what: "a pending bit set on the first object of the clean list; also expected: the sweep of free objects with a pending bit reports it as not on the claimed list",
    arrange: (heap) => {
      heap.shard(0).malloc(64);
      return () => {
        const r = heap.regions[0]!;
        const obj = r.u32[poolSlot(r, C64, P_FREE_HEAD)]!;
        setPending(r, obj);
        return [
          `shard 0: class 64: free object ${obj} on the clean list has its pending bit set`,
          `shard 0: class 64: free object ${obj} has a pending bit but is not on the claimed list`,
        ];
      };
    },
  },
  {
    shape: `class ${HOLE}: claimed list is corrupt at ${HOLE}`,
    what: "the link of the one object on the claimed list (freed by its owner) set to a live object",
    arrange: (heap) => {
      const a = heap.shard(0);
      const p = a.malloc(64);
      a.free(a.malloc(64));
      return () => {
        const r = heap.regions[0]!;
        const claimed = r.u32[poolSlot(r, C64, P_CLAIMED_HEAD)]!;
        expect(listFrom(r, claimed)).toHaveLength(1);
        r.u32[claimed >>> 2] = p;
        return [`shard 0: class 64: claimed list is corrupt at ${p}`];
      };
    },
  },
  {
    shape: `class ${HOLE}: object ${HOLE} on the claimed list has lost its pending bit`,
    what: "the pending bit of the one object on the claimed list cleared",
    arrange: (heap) => {
      const a = heap.shard(0);
      a.malloc(64);
      a.free(a.malloc(64));
      return () => {
        const r = heap.regions[0]!;
        const claimed = r.u32[poolSlot(r, C64, P_CLAIMED_HEAD)]!;
        clearPending(r, claimed);
        return [`shard 0: class 64: object ${claimed} on the claimed list has lost its pending bit`];
      };
    },
  },
  {
    shape: `class ${HOLE}: free count ${HOLE}, lists hold ${HOLE} clean + ${HOLE} claimed`,
    what: "P_FREE_COUNT of the 64-byte pool raised by 1",
    arrange: (heap) => {
      heap.shard(0).malloc(64);
      return () => {
        heap.regions[0]!.i32[poolSlot(heap.regions[0]!, C64, P_FREE_COUNT)] += 1;
        return ["shard 0: class 64: free count 64, lists hold 63 clean + 0 claimed"];
      };
    },
  },
  {
    shape: `class ${HOLE}: free object ${HOLE} has a pending bit but is not on the claimed list`,
    what: "a pending bit set on the first object of a span's own freelist (after trim())",
    arrange: (heap) => {
      const a = heap.shard(0);
      const p = a.malloc(64);
      a.trim();
      return () => {
        const r = heap.regions[0]!;
        const obj = r.u32[metaIndex(r, r.pageOf(p), PM_FREELIST)]!;
        expect(obj).not.toBe(0);
        setPending(r, obj);
        return [`shard 0: class 64: free object ${obj} has a pending bit but is not on the claimed list`];
      };
    },
  },
  {
    shape: `class ${HOLE}: span-free count ${HOLE} disagrees with spans`,
    what: "P_SPAN_FREE of the 64-byte pool raised by 1",
    arrange: (heap) => {
      heap.shard(0).malloc(64);
      return () => {
        heap.regions[0]!.i32[poolSlot(heap.regions[0]!, C64, P_SPAN_FREE)] += 1;
        return ["shard 0: class 64: span-free count 1 disagrees with spans"];
      };
    },
  },
  {
    shape: `class ${HOLE}: ${HOLE} used - ${HOLE} cached != ${HOLE} live objects`,
    what: "the last object of the clean list cut off (the one before it linked to 0) and P_FREE_COUNT lowered to match: an object lost, in no list",
    arrange: (heap) => {
      heap.shard(0).malloc(64);
      return () => {
        const r = heap.regions[0]!;
        const clean = listFrom(r, r.u32[poolSlot(r, C64, P_FREE_HEAD)]!);
        r.u32[clean.at(-2)! >>> 2] = 0;
        r.i32[poolSlot(r, C64, P_FREE_COUNT)] -= 1;
        return ["shard 0: class 64: 64 used - 62 cached != 1 live objects"];
      };
    },
  },
  {
    shape: `class ${HOLE}: span list is corrupt at page ${HOLE}`,
    what: "the 64-byte pool's span list (spans with objects on their own freelist) set to its one span, whose freelist is empty",
    arrange: (heap) => {
      const p = heap.shard(0).malloc(64);
      return () => {
        const r = heap.regions[0]!;
        r.i32[poolSlot(r, C64, P_SPAN_LIST)] = r.pageOf(p);
        return [`shard 0: class 64: span list is corrupt at page ${r.pageOf(p)}`];
      };
    },
  },
  {
    shape: `mallocs - frees = ${HOLE} but ${HOLE} objects are live`,
    what: "the 64-byte pool's malloc count raised by 1",
    arrange: (heap) => {
      heap.shard(0).malloc(64);
      return () => {
        heap.regions[0]!.i32[poolSlot(heap.regions[0]!, C64, P_MALLOCS_LO)] += 1;
        return ["shard 0: mallocs - frees = 2 but 1 objects are live"];
      };
    },
  },

  // --- The heap header (SharedHeap.check runs checkHeader first).
  {
    shape: "not a shardheap heap: wrong magic number",
    what: "the first magic word zeroed",
    arrange: (heap) => () => {
      new Int32Array(heap.buffer)[H_MAGIC0] = 0;
      return ["not a shardheap heap: wrong magic number"];
    },
  },
  {
    shape: `shardheap heap format version ${HOLE} is not supported (this is version ${HOLE}; ${HOLE} and ${HOLE} are read too)`,
    what: "the version word set to 99",
    arrange: (heap) => () => {
      new Int32Array(heap.buffer)[H_VERSION] = 99;
      return [`shardheap heap format version 99 is not supported (this is version ${HEAP_VERSION}; 3 and 4 are read too)`];
    },
  },
  // --- Debug pointers' quarantine (checkQuarantine).
  {
    shape: `the debug quarantine holds ${HOLE}, which is not a freed object it may hold`,
    what: "a freed object's quarantine link pointed at a live object, its check word forged to agree, the counts raised to match (the count check names the one not held)",
    debugPointers: true,
    arrange: (heap) => {
      const a = heap.shard(0);
      const p = a.malloc(64);
      const q = a.malloc(64);
      a.free(p);
      return () => {
        const r = heap.regions[0]!;
        r.u32[p >>> 2] = q;
        r.u32[(p >>> 2) + 1] = q ^ LINK_CHECK;
        r.u32[q >>> 2] = 0; // q's own first word (its data) ends the chain
        r.u32[r.hdr + S_QUARANTINE_TAIL] = q;
        r.u32[r.hdr + S_QUARANTINE_OBJECTS] = 2;
        r.u32[r.hdr + S_QUARANTINE_BYTES] = 128;
        return [`shard 0: the debug quarantine holds ${q}, which is not a freed object it may hold`, "shard 0: the debug quarantine counts 2 objects of 128 bytes but holds 1 of 64"];
      };
    },
  },
  {
    shape: `object ${HOLE} (${HOLE} bytes) was written after it was freed, at byte ${HOLE} (debug pointers)`,
    what: "byte 20 of a held object written",
    debugPointers: true,
    arrange: (heap) => {
      const p = heap.shard(0).malloc(64);
      heap.shard(0).free(p);
      return () => {
        heap.regions[0]!.u8[p + 20] = 1;
        return [`shard 0: object ${p} (64 bytes) was written after it was freed, at byte 20 (debug pointers)`];
      };
    },
  },
  {
    shape: `object ${HOLE} (${HOLE} bytes) was written after it was freed, at byte ${HOLE} (debug pointers)`,
    what: "byte 2 of the oldest of three held objects written, in its link to the next: the link is not followed, the two after it are found by their bits (the counts agree)",
    debugPointers: true,
    arrange: (heap) => {
      const a = heap.shard(0);
      const [p, q, s] = [a.malloc(64), a.malloc(64), a.malloc(64)];
      for (const x of [p, q, s]) a.free(x);
      return () => {
        const r = heap.regions[0]!;
        expect([r.u32[r.hdr + S_QUARANTINE_HEAD], r.u32[p >>> 2]]).toEqual([p, q]);
        r.u8[p + 2] ^= 0x40;
        return [`shard 0: object ${p} (64 bytes) was written after it was freed, at byte 2 (debug pointers)`];
      };
    },
  },
  {
    shape: `the debug quarantine's chain is corrupt at ${HOLE}`,
    what: "the only held object's link set to 8 (the heap header), its check word forged to agree",
    debugPointers: true,
    arrange: (heap) => {
      const p = heap.shard(0).malloc(64);
      heap.shard(0).free(p);
      return () => {
        heap.regions[0]!.u32[p >>> 2] = 8;
        heap.regions[0]!.u32[(p >>> 2) + 1] = 8 ^ LINK_CHECK;
        return ["shard 0: the debug quarantine's chain is corrupt at 8"];
      };
    },
  },
  {
    shape: `the debug quarantine counts ${HOLE} objects of ${HOLE} bytes but holds ${HOLE} of ${HOLE}`,
    what: "the held-bytes count set to 999 with one 64-byte object held",
    debugPointers: true,
    arrange: (heap) => {
      const p = heap.shard(0).malloc(64);
      heap.shard(0).free(p);
      return () => {
        const r = heap.regions[0]!;
        r.u32[r.hdr + S_QUARANTINE_BYTES] = 999;
        expect(r.u32[r.hdr + S_QUARANTINE_HEAD]).toBe(p);
        return ["shard 0: the debug quarantine counts 1 objects of 999 bytes but holds 1 of 64"];
      };
    },
  },
  {
    shape: `${HOLE} freed object${HOLE} written after ${HOLE} free (debug pointers found them in the quarantine; see the SHARDHEAP_WRITE_AFTER_FREE warnings)`,
    what: "the count of held objects found written set to 2",
    debugPointers: true,
    arrange: (heap) => () => {
      const r = heap.regions[0]!;
      r.i32[r.hdr + S_QUARANTINE_WRITTEN] = 2;
      return ["shard 0: 2 freed objects were written after their free (debug pointers found them in the quarantine; see the SHARDHEAP_WRITE_AFTER_FREE warnings)"];
    },
  },
  {
    shape: `corrupt shardheap header: unknown mode flags ${HOLE}`,
    what: "the mode word set to 6 (a debug-pointers bit and two no version knows)",
    arrange: (heap) => () => {
      new Int32Array(heap.buffer)[H_FLAGS] = 6;
      return ["corrupt shardheap header: unknown mode flags 6"];
    },
  },
  {
    shape: "not a shardheap heap: page or header size differs",
    what: "the page-size word set to 8192",
    arrange: (heap) => () => {
      new Int32Array(heap.buffer)[H_PAGE_SIZE] = 8192;
      return ["not a shardheap heap: page or header size differs"];
    },
  },
  {
    shape: `corrupt shardheap header: ${HOLE} of ${HOLE} bytes`,
    what: "the shard-count word set to 0",
    arrange: (heap) => () => {
      new Int32Array(heap.buffer)[H_SHARDS] = 0;
      return [`corrupt shardheap header: 0 shards of ${MiB} bytes`];
    },
  },
  {
    shape: `corrupt shardheap header: ${HOLE} of ${HOLE} bytes is more than 4 GiB`,
    what: "the shard-size word set to 2^20 pages (4 GiB, plus the heap header)",
    arrange: (heap) => () => {
      new Int32Array(heap.buffer)[H_SHARD_PAGES] = 2 ** 20;
      return [`corrupt shardheap header: 1 shard of ${2 ** 32} bytes is more than 4 GiB`];
    },
  },
  {
    shape: `corrupt shardheap header: a profiler of ${HOLE} sites (shards of ${HOLE} bytes hold 1 to ${HOLE})`,
    what: "the profiler-capacity word (heapprofSites) set to 0",
    arrange: (heap) => () => {
      new Int32Array(heap.buffer)[H_PROF_SITES] = 0;
      return [`corrupt shardheap header: a profiler of 0 sites (shards of ${MiB} bytes hold 1 to 408)`];
    },
  },
  {
    shape: `shardheap heap size mismatch: header says ${HOLE} of ${HOLE} bytes (${HOLE} bytes), buffer has ${HOLE}`,
    what: "the shard-count word of a 1-shard heap set to 2",
    arrange: (heap) => () => {
      new Int32Array(heap.buffer)[H_SHARDS] = 2;
      return [
        `shardheap heap size mismatch: header says 2 shards of ${MiB} bytes (${HEAP_HEADER_BYTES + 2 * MiB} bytes), buffer has ${heap.buffer.byteLength}`,
      ];
    },
  },
];

/**
 * Header messages check() cannot give on a heap that exists, each with why
 * and a test of the reason below.
 */
const NOT_FROM_A_LIVE_HEAP = new Map([
  // A heap's buffer never shrinks; attach() gives this one (tested below).
  [`not a shardheap heap: ${HOLE} bytes is smaller than its header`, "attach"],
  // Shards of at least MIN_SHARD_BYTES (checked just before) always hold the largest fallback span.
  [`corrupt shardheap header: a shard of ${HOLE} bytes is too small`, "unreachable"],
]);

describe("heap.check() messages", () => {
  it("the messages are read from the source: check.ts and checkHeader", () => {
    // A scanner that found nothing would make the coverage test below vacuous.
    expect(CHECK_MESSAGES.length).toBeGreaterThanOrEqual(40);
    expect(CHECK_MESSAGES).toContain(`free spans at pages ${HOLE} and ${HOLE} touch but were not merged`);
    expect(CHECK_MESSAGES).toContain(`shard ${HOLE}: object ${HOLE} is in two cross-shard chains`);
    expect(HEADER_MESSAGES).toContain("not a shardheap heap: wrong magic number");
    expect(HEADER_MESSAGES.length).toBeGreaterThanOrEqual(6);
    expect(CHAIN_PLACES).toEqual(["cross-shard inbox", `shard ${HOLE}'s outbox`]);
  });

  it("every message in the source has a case, and every case's message is in the source", () => {
    const covered = new Set([...CASES.map((c) => c.shape), ...NOT_FROM_A_LIVE_HEAP.keys()]);
    const inSource = new Set([...CHECK_MESSAGES, ...HEADER_MESSAGES]);
    expect([...inSource].filter((s) => !covered.has(s)), "messages of the checker without a case here").toEqual([]);
    expect([...covered].filter((s) => !inSource.has(s)), "cases whose message the checker no longer has").toEqual([]);
  });

  it("the chain messages are tested in both kinds of chain forEachChained walks: an inbox and an outbox", () => {
    const chainShapes = CHECK_MESSAGES.filter((s) => s.startsWith(`shard ${HOLE}: ${HOLE} `));
    expect(chainShapes).toHaveLength(2);
    for (const shape of chainShapes) {
      const messages = CASES.filter((c) => c.shape === shape).flatMap((c) => c.arrange(SharedHeap.create({ shards: c.shards ?? 1, shardBytes: MiB }))());
      for (const place of CHAIN_PLACES) {
        const inPlace = new RegExp(`^shard \\d+: ${place.split(HOLE).map(escape).join(".+?")} `);
        expect(messages.some((m) => pattern(shape).test(m) && inPlace.test(m)), `"${shape}" in "${place}"`).toBe(true);
      }
    }
  });

  for (const c of CASES) {
    it(`${c.shape}: ${c.what}`, () => {
      const heap = SharedHeap.create({ shards: c.shards ?? 1, shardBytes: MiB, debugPointers: c.debugPointers ?? false });
      const corrupt = c.arrange(heap);
      expect(heap.check(), "the heap before the corruption").toEqual([]);
      const saved = new Uint8Array(heap.buffer).slice();
      const expected = corrupt();
      for (const m of expected) expect(shapesOf(m), `the message shape "${m}" is an instance of`).toHaveLength(1);
      expect(expected.some((m) => shapesOf(m)[0] === c.shape), "the case expects its own message").toBe(true);
      expect(heap.check()).toEqual(expected);
      new Uint8Array(heap.buffer).set(saved);
      expect(heap.check(), "the heap with the words put back").toEqual([]);
    });
  }

  it("control: the pool span the length case forges is clean at the class's own length", () => {
    const heap = SharedHeap.create({ shards: 1, shardBytes: MiB });
    forgePoolSpan(heap.regions[0]!, C16384, classSpanPages[C16384]!);
    expect(heap.check()).toEqual([]);
  });

  it(`"smaller than its header" comes from attach, which checks a buffer with the same function`, () => {
    expect(() => SharedHeap.attach(new SharedArrayBuffer(64))).toThrow(HeapFormatError);
    expect(() => SharedHeap.attach(new SharedArrayBuffer(64))).toThrow(/^not a shardheap heap: 64 bytes is smaller than its header$/);
  });

  it(`"a shard ... is too small" cannot happen after the MIN_SHARD_BYTES check before it`, () => {
    // dataPagesFor grows with the shard: its floor is at MIN_SHARD_BYTES, whatever profiler capacity the header allows.
    const floor = dataPagesFor(MIN_SHARD_BYTES, maxProfilerSites(MIN_SHARD_BYTES));
    expect(floor).toBeGreaterThanOrEqual(Math.max(...classFallbackSpanPages));
    for (let bytes = MIN_SHARD_BYTES; bytes <= 64 * MiB; bytes += 4096 * 61) {
      expect(dataPagesFor(bytes, maxProfilerSites(bytes))).toBeGreaterThanOrEqual(floor);
      expect(dataPagesFor(bytes, 1)).toBeGreaterThanOrEqual(floor);
    }
  });
});
