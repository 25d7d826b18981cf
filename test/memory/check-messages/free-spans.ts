/**
 * heap.check()'s messages about the free-span lists and their bitmap: each
 * provoked by writing buffer words (check-messages.test.ts).
 */
import { expect } from "vitest";
import { PM_NEXT, PM_PREV, S_SPAN_BITMAP, S_SPAN_SUMMARY } from "../../../src/memory/layout.js";
import { spanListMinPages } from "../../../src/memory/page-spans.js";
import { HOLE } from "./shapes.js";
import { freshListOfAll, metaIndex, type Case } from "./corruption.js";

export const FREE_SPAN_CASES: readonly Case[] = [
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
];
