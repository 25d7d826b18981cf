/**
 * heap.check()'s messages of the page walk (spans tile the region): each
 * provoked by writing buffer words (check-messages.test.ts).
 */
import { expect } from "vitest";
import {
  PAGE_FREE,
  PAGE_INNER,
  PAGE_POOL,
  PM_HEAD,
  PM_NEXT,
  PM_PREV,
  PM_SITE,
  PM_SPAN_PAGES,
  PM_STATE,
  S_FREE_PAGES,
  S_SPAN_BITMAP,
  S_SPAN_SUMMARY,
} from "../../../src/memory/layout.js";
import { allocatePageSpan } from "../../../src/memory/page-spans.js";
import { HOLE } from "./shapes.js";
import { SITE_NONE, clearLive, metaIndex, setLive, setPending, stuck, type Case } from "./corruption.js";

export const PAGE_WALK_CASES: readonly Case[] = [
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
];
