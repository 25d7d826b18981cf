/**
 * heap.check()'s messages about pool spans: each provoked by writing
 * buffer words (check-messages.test.ts).
 */
import { expect } from "vitest";
import {
  PAGE_INNER,
  PM_FREELIST,
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
} from "../../../src/memory/layout.js";
import { SAMPLED_POOL_BASE, classFallbackSpanPages, classSpanPages } from "../../../src/memory/size-classes.js";
import { sampledTagIndex } from "../../../src/memory/small-pool.js";
import { HOLE } from "./shapes.js";
import { C64, C1280, C16384, SITE_NONE, clearPending, forgePoolSpan, listFrom, metaIndex, poolSlot, setPending, type Case } from "./corruption.js";

export const POOL_SPAN_CASES: readonly Case[] = [
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
];
