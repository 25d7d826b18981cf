/**
 * Values on the wire between shards: task arguments and results written
 * straight into a ring of the messaging buffer (or a scratch buffer), with
 * the meaning of a structured clone (what postMessage delivers).
 *
 * Two encodings, chosen per value:
 *   - plain: a tag byte per value, for the data calls carry most often:
 *     numbers, strings, booleans, null, undefined, and plain objects,
 *     arrays and whole-buffer typed arrays of them. Each is read once
 *     (getters run once, as in a structured clone); object identity is
 *     kept (an object met twice, or a cycle, sends the value down the
 *     second path).
 *   - v8: V8's own structured-clone wire format (value-codec.ts) for
 *     everything else: Map, Set, Date, RegExp, BigInt, errors, class
 *     instances, sparse arrays and arrays with fields of their own, typed
 *     arrays over part of a buffer, shared structure. Exactly what
 *     postMessage would deliver, and the same DataCloneError for what it
 *     refuses.
 * Objects: a plain object's keys (Object.keys order) form a shape; the
 * first object of a shape on a channel (an ordered pair of threads)
 * carries the keys with a new id, later ones only the id and their values
 * (ShapeTable on the sending side, ShapeCache on the receiving side, which
 * builds objects of a shape in use with a compiled object literal). A
 * 4-field object's encode + decode: 480 ns with shapes, 910 ns with its
 * keys inline (min of 20 runs, 2 cores, loaded).
 *
 * A value that refers to a SharedArrayBuffer cannot be carried as bytes
 * (it must arrive shared): encoding throws SHARED_MEMORY and the caller
 * sends `sideValue` through postMessage instead (outgoing.ts, the side
 * path).
 *
 * A value is read once, as structuredClone reads it: each getter runs once
 * whatever path the value takes (an encoder that retried a value on each
 * path ran them 2 to 4 times).
 *   - A fixed target (the ring, an overflow chunk) that runs out of room is
 *     left for the writer's own scratch buffer with what was written so far
 *     (spill), never encoded again; so is one that a nested call needs
 *     (a getter that calls submitTo to the same peer: outgoing.ts).
 *   - When the plain encoding gives up part way (a Map, a Date, an object
 *     met twice...), the objects it has visited have had their getters
 *     run. If none of them has an accessor (one descriptor look-up per key
 *     they have, on this slow path only: about what V8's serializer takes
 *     for them), V8's serializer (or postMessage) reads the value itself,
 *     as before. Otherwise it reads a copy in which each visited object is
 *     replaced by the values already read (snapshotOf), identity kept
 *     among them; what the plain pass never reached is read there, once.
 *   - A value that holds shared memory where the plain pass saw it goes to
 *     postMessage without V8's serializer reading it first.
 * What is still read twice, each a corner no ordinary value reaches: an
 * array index defined as an accessor (Object.defineProperty(array, 3,
 * { get })) when the value falls back (telling one apart costs a
 * descriptor per element, 30x the encoding); shared memory that only
 * V8's serializer finds (inside a Map, a Set or a class instance: the
 * getters it read are read again by postMessage); and a visited object
 * with an accessor that the slow path also reaches through a class
 * instance or an error (it arrives there as a second object).
 *
 * Why a hand-written plain encoding, measured here (2 cores, loaded, per
 * encode + decode round trip on one thread): a number 31 ns (v8.Serializer
 * 5,451 ns, JSON + TextEncoder 1,065, structuredClone 539, msgpackr 2.1
 * with structuredClone 870, plain msgpackr 1,094); a 4-field object
 * 1,295 ns (v8 12,839, JSON 3,435, structuredClone 2,417, msgpackr
 * structuredClone 2,324, plain msgpackr 1,787). The plain form also writes
 * into the shared ring in place, where every library returns a fresh
 * buffer to copy. msgpackr would still need the v8 path beside it for
 * exact postMessage semantics (sparse arrays, array fields, -0 in keys,
 * SharedArrayBuffer), so it would not remove code either.
 *
 * The files: wire-format.ts (the tags, the typed-array kinds, WireBytes),
 * wire-shapes.ts (ShapeTable and ShapeCache), wire-writer.ts (WireWriter:
 * the plain pass, spilling, the fallback to V8's serializer),
 * wire-snapshot.ts (the copy the fallback reads when getters have run),
 * wire-reader.ts (WireReader). The messaging code imports them from here.
 */

export { SHARED_MEMORY, WireBytes } from "./wire-format.js";
export { ShapeCache, ShapeTable } from "./wire-shapes.js";
export { WireWriter } from "./wire-writer.js";
export { WireReader } from "./wire-reader.js";
