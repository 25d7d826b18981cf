/**
 * heap.check()'s messages about the heap's header (SharedHeap.check runs
 * checkHeader first): each provoked by writing buffer words
 * (check-messages.test.ts).
 */
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
} from "../../../src/memory/layout.js";
import { HOLE } from "./shapes.js";
import { MiB, type Case } from "./corruption.js";

export const HEADER_CASES: readonly Case[] = [
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
