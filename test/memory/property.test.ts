/**
 * Model-based property tests of the allocator (fast-check, fixed seeds).
 *
 * Each run makes a fresh two-shard heap and plays a random list of
 * operations against it and against a plain model (which objects are live,
 * which are waiting in a cross-shard inbox, what each holds). After every
 * operation the heap must agree with the model: no overlapping objects,
 * sizes and alignments as asked, pointers inside their owner's region,
 * contents intact, statistics adding up, heap.check() clean. At the end
 * every object is freed, the inboxes drained and the shards trimmed, and
 * every shard must be back to all-free.
 *
 * The invalid calls interleaved with valid ones: property-invalid.test.ts.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { Harness, VERBOSE, newCoverage, plugins } from "./property-harness.js";
import { opArb, shardBytesArb } from "./property-ops.js";

describe("allocator properties", () => {
  it("random malloc / free / realloc / aligned / cross-shard sequences agree with a model", () => {
    const cov = newCoverage();
    fc.assert(
      fc.property(shardBytesArb, fc.array(opArb, { minLength: 1, maxLength: 100, size: "max" }), (shardBytes, ops) => {
        const h = new Harness(shardBytes, cov);
        for (const op of ops) {
          h.run(op);
          h.checkInvariants(true);
        }
        h.finish();
      }),
      { seed: 0x5eed_0001, numRuns: 50, plugins },
    );
    if (VERBOSE) console.log("allocator model coverage:", JSON.stringify(cov));
    // The generators must reach the interesting paths, not just pass vacuously.
    expect(cov.ooms).toBeGreaterThan(0);
    expect(cov.oomRetrySucceeded).toBeGreaterThan(0);
    expect(cov.inPlaceLargeShrinks).toBeGreaterThan(0);
    expect(cov.inPlaceSmall).toBeGreaterThan(0);
    expect(cov.reallocMoves).toBeGreaterThan(0);
    expect(cov.crossReallocs).toBeGreaterThan(0);
    expect(cov.crossFrees).toBeGreaterThan(0);
    expect(cov.explicitDrained).toBeGreaterThan(0);
    expect(cov.implicitDrains).toBeGreaterThan(0);
    expect(cov.bigAlignments).toBeGreaterThan(0);
    expect(cov.spansReleasedOnFree).toBeGreaterThan(0);
    expect(cov.profiledSmall).toBeGreaterThan(0);
    expect(cov.profiledAlone).toBeGreaterThan(0);
    expect(cov.freeSpansChecked).toBeGreaterThan(0);
  });
});
