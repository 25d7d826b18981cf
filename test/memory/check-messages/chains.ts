/**
 * heap.check()'s messages about cross-shard chains (checkRegions): each
 * provoked by writing buffer words (check-messages.test.ts).
 */
import { HOLE } from "./shapes.js";
import type { Case } from "./corruption.js";

export const CHAIN_CASES: readonly Case[] = [
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
];
