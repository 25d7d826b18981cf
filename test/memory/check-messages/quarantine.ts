/**
 * heap.check()'s messages about debug pointers' quarantine
 * (checkQuarantine): each provoked by writing buffer words
 * (check-messages.test.ts).
 */
import { expect } from "vitest";
import { S_QUARANTINE_BYTES, S_QUARANTINE_HEAD, S_QUARANTINE_OBJECTS, S_QUARANTINE_TAIL, S_QUARANTINE_WRITTEN } from "../../../src/memory/layout.js";
import { LINK_CHECK } from "../../../src/memory/quarantine.js";
import { HOLE } from "./shapes.js";
import type { Case } from "./corruption.js";

export const QUARANTINE_CASES: readonly Case[] = [
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
];
