/**
 * The SharedMap's lock-free steps, the ones every lookup and release runs:
 * the probe (find a slot whose tag matches, protect its descriptor, check
 * that the slot and the table still name it) and the reference counts.
 * shared-map.ts states the protocol and argues why it is safe; this file
 * is that protocol as code, twice: as WebAssembly over the heap's shared
 * memory, and as the same steps with Atomics for a thread that attached
 * the heap by its buffer alone (../atomics.ts: a thread gets the WebAssembly
 * kind only with heap.memory).
 *
 * Why WebAssembly: in Node 20 an Atomics call is a builtin call of some
 * 60-120 machine instructions (~14 ns a load, ~24 ns a compareExchange
 * measured here, under load), and a lookup needs four to six of them; the
 * same probe as one WebAssembly call pays one call, and its atomic loads
 * are plain moves on x86.
 *
 * A probe protects what it finds one of two ways, by the `hazard` it is
 * given: a hazard slot's address (the reader's own, in its reader record):
 * store the descriptor's id there, then validate (nothing shared is
 * written: a hazard slot is on its reader's own cache line); or 0: take a
 * count on the descriptor with compareExchange, never from 0, then
 * validate.
 *
 * Results (the descriptor's byte address d is a multiple of 32, so its
 * low bits are free for a verdict; an address past 2^31 comes back as a
 * negative i32: callers read it with >>> 0 or >>> 2):
 *   probe(hdr, hash, hazard) / probeNext(hdr, hash):
 *     0     no entry of this hash's tag on the key's probe path: absent;
 *     2     the map has no table (destroyed);
 *     d     d is protected (its id in the hazard slot, or a count held),
 *           and the slot named it in the current table after that;
 *     d | 1 (counted only) a count is held on d but the slot or the table
 *           changed, and it is the last one: the caller releases it (and
 *           frees what it held), then probes again.
 *   probeNext continues after the slot where the last probe stopped, in
 *   the same table, the same way (a key compare that failed; the caller
 *   cleared the hazard or gave the count back), from WebAssembly globals:
 *   each thread has its own instance, so they are the thread's.
 *   release(d): the count after the release; -1 if there was none to
 *     release; -2 if it was the last and the entry is LINKED (the index's
 *     own reference: somebody released twice; nothing changed).
 *   retain(d): the count after one more reference, from any count (the
 *     caller holds d, by a count or a hazard).
 *   findHazard(records, count, id): 1 if a hazard slot of the first
 *     `count` reader records holds id, else 0.
 *   findReplacer(at, count, seg): the address of the first of `count`
 *     writer records' replacing words, from `at`, that holds a token with
 *     `seg` as its segment, else 0 (one call for every shard's record: an
 *     Atomics.load each cost an insert 5-8 ns).
 */
import type { WasmMemory } from "../atomics.js";
import {
  D_REFS,
  D_STATE,
  GROUP_SHIFT,
  HAZARDS_PER_READER,
  LINKED,
  M_DIRECTORY,
  M_SEGMENT_MASK,
  READER_BYTES,
  R_HAZARDS,
  WRITER_BYTES,
  WR_REPLACING,
  WR_REPLACING_SEGMENT,
  SEGMENTS,
  SEGMENT_MULTIPLIER,
  SG_MOVES,
  SG_TABLE,
  STATE_MASK,
  TABLE_HEADER_BYTES,
  T_MASK,
  UNLINKED,
  descriptorAt,
} from "./layout.js";
import { assembleModule, type WasmFunction } from "../wasm-assembler.js";
import { ABSENT, AtomicsMapSteps, INVALID_HELD, NO_TABLE, type MapAtomics } from "./atomics-twin.js";


export { ABSENT, INVALID_HELD, NO_TABLE, AtomicsMapSteps, type MapAtomics } from "./atomics-twin.js";

// The protocol in WebAssembly's text form (wasm-assembler.ts). Offsets are
// the layout's; ${...} are filled in below.
const DESC = `
  ;; the chunk (layout.ts descriptorAt): group g = 31 - clz((id >> 8) + 1), o = id - ((256 << g) - 256),
  ;; entry (g << 2) | (o >> (6 + g)); d = directory[entry] + ((o & ((64 << g) - 1)) << 5)
  local.get $id
  i32.const ${6 + GROUP_SHIFT}
  i32.shr_u
  i32.const 1
  i32.add
  i32.clz
  local.set $k
  i32.const 31
  local.get $k
  i32.sub
  local.set $k
  local.get $id
  i32.const ${64 << GROUP_SHIFT}
  local.get $k
  i32.shl
  i32.const ${64 << GROUP_SHIFT}
  i32.sub
  i32.sub
  local.set $o
  local.get $hdr
  local.get $k
  i32.const ${GROUP_SHIFT}
  i32.shl
  local.get $o
  i32.const 6
  local.get $k
  i32.add
  i32.shr_u
  i32.or
  i32.const 2
  i32.shl
  i32.add
  i32.load offset=${M_DIRECTORY}
  local.get $o
  i32.const 64
  local.get $k
  i32.shl
  i32.const 1
  i32.sub
  i32.and
  i32.const 5
  i32.shl
  i32.add`;

const SLOT = `
  local.get $T
  local.get $i
  i32.const 2
  i32.shl
  i32.add
  i32.atomic.load offset=${TABLE_HEADER_BYTES}`;

const SAVE = `
  local.get $seg
  global.set $segment
  local.get $T
  global.set $table
  local.get $moves
  global.set $moved
  local.get $i
  global.set $index
  local.get $hazard
  global.set $hazardSlot`;

/** The 8-byte pair (refs, state) on the stack, from the i32 instructions that push each. */
function PAIR(refs: string, state: string): string {
  return `${refs}
    i64.extend_i32_u
    ${state}
    i64.extend_i32_u
    i64.const 32
    i64.shl
    i64.or`;
}

/** The key's segment: hdr + SEGMENTS + (((hash * C) >>> 16) & mask) * SEGMENT_BYTES (layout.ts segmentIndex). */
const SEGMENT = `
  local.get $hdr
  local.get $hash
  i32.const ${SEGMENT_MULTIPLIER | 0}
  i32.mul
  i32.const 16
  i32.shr_u
  local.get $hdr
  i32.load offset=${M_SEGMENT_MASK}
  i32.and
  i32.const 7
  i32.shl
  i32.add
  i32.const ${SEGMENTS}`;

/** Read the slot again, or start over if the table was replaced. */
const AGAIN = `
  local.get $seg
  i32.atomic.load offset=${SG_TABLE}
  local.get $T
  i32.ne
  if
    i32.const 0
    local.set $T
    br $restart
  end
  br $slot`;

/** R3: if the slot, in the current table, still names the descriptor, it is the caller's: save the place and return it. */
const VALIDATE = `
  ${SLOT}
  local.get $s
  i32.eq
  if
    local.get $seg
    i32.atomic.load offset=${SG_TABLE}
    local.get $T
    i32.eq
    if
      ${SAVE}
      local.get $d
      return
    end
  end`;

const SCAN = `
  local.get $hash
  i32.const 24
  i32.shr_u
  local.set $tag
  loop $restart
    local.get $T
    i32.eqz
    if
      ;; a fresh start: the segment's current table, its move count, the key's home
      local.get $seg
      i32.atomic.load offset=${SG_TABLE}
      local.set $T
      local.get $seg
      i32.atomic.load offset=${SG_MOVES}
      local.set $moves
      local.get $T
      i32.eqz
      if
        i32.const ${NO_TABLE}
        return
      end
      local.get $hash
      local.set $i
    end
    local.get $T
    i32.load offset=${T_MASK}
    local.set $mask
    local.get $i
    local.get $mask
    i32.and
    local.set $i
    local.get $mask
    i32.const 1
    i32.add
    local.set $steps
    loop $slot
      ${SLOT}
      local.tee $s
      i32.eqz
      if
        ;; an empty slot ends the path: absent, unless an entry moved meanwhile
        local.get $seg
        i32.atomic.load offset=${SG_MOVES}
        local.get $moves
        i32.ne
        if
          i32.const 0
          local.set $T
          br $restart
        end
        i32.const ${ABSENT}
        return
      end
      local.get $s
      i32.const 255
      i32.and
      local.get $tag
      i32.eq
      if
        local.get $s
        i32.const 8
        i32.shr_u
        local.set $id
        ${DESC}
        local.set $d
        local.get $hazard
        if
          ;; protect it by the hazard slot, then validate
          local.get $hazard
          local.get $id
          i32.atomic.store
          ${VALIDATE}
          local.get $hazard
          i32.const 0
          i32.atomic.store
        else
          ;; protect it by a count, never taken from 0
          local.get $d
          i32.atomic.load offset=${D_REFS}
          local.set $c
          block $held
            loop $take
              local.get $c
              i32.eqz
              if
                ;; freed: the slot no longer names it (unless this table is an old one)
                ${AGAIN}
              end
              local.get $d
              local.get $c
              local.get $c
              i32.const 1
              i32.add
              i32.atomic.rmw.cmpxchg offset=${D_REFS}
              local.tee $seen
              local.get $c
              i32.eq
              br_if $held
              local.get $seen
              local.set $c
              br $take
            end
          end
          ;; held: does the slot, in the current table, still name it?
          ${VALIDATE}
          ;; not: give the count back, unless it is the last (the caller frees then)
          local.get $d
          i32.atomic.load offset=${D_REFS}
          local.set $c
          loop $give
            local.get $c
            i32.const 1
            i32.le_u
            if
              local.get $d
              i32.const ${INVALID_HELD}
              i32.or
              return
            end
            local.get $d
            local.get $c
            local.get $c
            i32.const 1
            i32.sub
            i32.atomic.rmw.cmpxchg offset=${D_REFS}
            local.tee $seen
            local.get $c
            i32.ne
            if
              local.get $seen
              local.set $c
              br $give
            end
          end
        end
        ;; the slot again, or from the start if the table was replaced
        ${AGAIN}
      end
      ;; the next slot; a whole lap without an empty one (only while the owner races us): start over
      local.get $i
      i32.const 1
      i32.add
      local.get $mask
      i32.and
      local.set $i
      local.get $steps
      i32.const 1
      i32.sub
      local.tee $steps
      br_if $slot
      i32.const 0
      local.set $T
      br $restart
    end
  end
  unreachable`;

const RELEASE = `
  local.get $d
  i32.atomic.load offset=${D_REFS}
  local.set $c
  loop $retry
    local.get $c
    i32.const 0
    i32.le_s
    if
      i32.const -1
      return
    end
    local.get $c
    i32.const 1
    i32.eq
    if
      ;; the last reference of a linked entry is the index's own
      local.get $d
      i32.atomic.load offset=${D_STATE}
      i32.const ${STATE_MASK}
      i32.and
      i32.const ${LINKED}
      i32.eq
      if
        i32.const -2
        return
      end
    end
    local.get $d
    local.get $c
    local.get $c
    i32.const 1
    i32.sub
    i32.atomic.rmw.cmpxchg offset=${D_REFS}
    local.tee $seen
    local.get $c
    i32.eq
    if
      local.get $c
      i32.const 1
      i32.sub
      return
    end
    local.get $seen
    local.set $c
    br $retry
  end
  unreachable`;

const RETAIN = `
  local.get $d
  i32.const 1
  i32.atomic.rmw.add offset=${D_REFS}
  i32.const 1
  i32.add`;

const FIND_HAZARD = `
  loop $record
    local.get $count
    i32.eqz
    if
      i32.const 0
      return
    end
    i32.const ${HAZARDS_PER_READER}
    local.set $j
    local.get $records
    i32.const ${R_HAZARDS}
    i32.add
    local.set $a
    loop $slot
      local.get $a
      i32.atomic.load
      local.get $id
      i32.eq
      if
        i32.const 1
        return
      end
      local.get $a
      i32.const 4
      i32.add
      local.set $a
      local.get $j
      i32.const 1
      i32.sub
      local.tee $j
      br_if $slot
    end
    local.get $records
    i32.const ${READER_BYTES}
    i32.add
    local.set $records
    local.get $count
    i32.const 1
    i32.sub
    local.set $count
    br $record
  end
  unreachable`;

const FIND_REPLACER = `
  loop $record
    local.get $count
    i32.eqz
    if
      i32.const 0
      return
    end
    local.get $at
    i32.atomic.load
    if
      local.get $at
      i32.atomic.load offset=${WR_REPLACING_SEGMENT - WR_REPLACING}
      local.get $seg
      i32.eq
      if
        local.get $at
        return
      end
    end
    local.get $at
    i32.const ${WRITER_BYTES}
    i32.add
    local.set $at
    local.get $count
    i32.const 1
    i32.sub
    local.set $count
    br $record
  end
  unreachable`;

/**
 * unlinkEntry(d, expected, drop): if d's state word is still `expected`
 * (LINKED or RESERVED, of one generation), make it UNLINKED and take
 * `drop` (1 or 0) from its count, both in one 8-byte compareExchange of
 * the pair (refs, state); the count after, or -1 when the state was
 * another (done already, or another generation: nothing changed). One
 * step, so a writer that breaks a dead writer's lock can finish an unlink
 * without ever dropping the index's reference twice (repair.ts).
 */
const UNLINK_ENTRY = `
  loop $retry
    local.get $d
    i32.atomic.load offset=${D_STATE}
    local.get $expected
    i32.ne
    if
      i32.const -1
      return
    end
    local.get $d
    i32.atomic.load offset=${D_REFS}
    local.set $c
    local.get $d
    ${PAIR("local.get $c", "local.get $expected")}
    ${PAIR("local.get $c\n    local.get $drop\n    i32.sub", `local.get $expected\n    i32.const -8\n    i32.and\n    i32.const ${UNLINKED}\n    i32.or`)}
    i64.atomic.rmw.cmpxchg offset=${D_REFS}
    ${PAIR("local.get $c", "local.get $expected")}
    i64.eq
    if
      local.get $c
      local.get $drop
      i32.sub
      return
    end
    br $retry
  end
  unreachable`;

const SCAN_LOCALS = ["mask", "s", "d", "c", "seen", "steps", "tag", "id", "k", "o"];

/** The module's source (exported for the test that validates it). */
export const MAP_MODULE: readonly WasmFunction[] = [
  { name: "scan", params: ["hdr", "seg", "hash", "T", "moves", "i", "hazard"], locals: SCAN_LOCALS, result: true, exported: false, body: SCAN },
  {
    name: "probe", params: ["hdr", "hash", "hazard"], result: true, exported: true,
    body: `local.get $hdr\n${SEGMENT}\ni32.add\nlocal.get $hash\ni32.const 0\ni32.const 0\ni32.const 0\nlocal.get $hazard\ncall $scan`,
  },
  {
    name: "probeNext", params: ["hdr", "hash"], result: true, exported: true,
    body: "local.get $hdr\nglobal.get $segment\nlocal.get $hash\nglobal.get $table\nglobal.get $moved\nglobal.get $index\ni32.const 1\ni32.add\nglobal.get $hazardSlot\ncall $scan",
  },
  { name: "unlinkEntry", params: ["d", "expected", "drop"], locals: ["c"], result: true, exported: true, body: UNLINK_ENTRY },
  {
    // A writer's two stores in one call (a call costs more than an x86 store): d's state, then its count 1.
    name: "reserveSteps", params: ["d", "state"], result: false, exported: true,
    body: `local.get $d\nlocal.get $state\ni32.atomic.store offset=${D_STATE}\nlocal.get $d\ni32.const 1\ni32.atomic.store offset=${D_REFS}`,
  },
  {
    name: "linkSteps", params: ["d", "state", "slot", "word"], result: false, exported: true,
    body: `local.get $d\nlocal.get $state\ni32.atomic.store offset=${D_STATE}\nlocal.get $slot\nlocal.get $word\ni32.atomic.store`,
  },
  {
    // replaceUnlocked's handshake in one call: its token in its record, then the segment's lock read (waitForReplacers has the other half).
    name: "announce", params: ["record", "token", "lock"], result: true, exported: true,
    body: "local.get $record\nlocal.get $token\ni32.atomic.store\nlocal.get $lock\ni32.atomic.load",
  },
  {
    // replaceUnlocked's swap: d's state LINKED, then the slot from `seen` to d's word; what the slot held.
    name: "swapSteps", params: ["d", "state", "slot", "seen", "word"], result: true, exported: true,
    body: `local.get $d\nlocal.get $state\ni32.atomic.store offset=${D_STATE}\nlocal.get $slot\nlocal.get $seen\nlocal.get $word\ni32.atomic.rmw.cmpxchg`,
  },
  { name: "release", params: ["d"], locals: ["c", "seen"], result: true, exported: true, body: RELEASE },
  { name: "retain", params: ["d"], result: true, exported: true, body: RETAIN },
  { name: "findHazard", params: ["records", "count", "id"], locals: ["j", "a"], result: true, exported: true, body: FIND_HAZARD },
  { name: "findReplacer", params: ["at", "count", "seg"], result: true, exported: true, body: FIND_REPLACER },
  { name: "load", params: ["a"], result: true, exported: true, body: "local.get $a\ni32.atomic.load" },
  { name: "store", params: ["a", "v"], result: false, exported: true, body: "local.get $a\nlocal.get $v\ni32.atomic.store" },
  {
    name: "compareExchange", params: ["a", "e", "r"], result: true, exported: true,
    body: "local.get $a\nlocal.get $e\nlocal.get $r\ni32.atomic.rmw.cmpxchg",
  },
  { name: "exchange", params: ["a", "v"], result: true, exported: true, body: "local.get $a\nlocal.get $v\ni32.atomic.rmw.xchg" },
];

export function encodeMapModule(): Uint8Array {
  return assembleModule({ globals: ["segment", "table", "moved", "index", "hazardSlot"], functions: MAP_MODULE });
}

interface WebAssemblyApi {
  Module: new (bytes: Uint8Array) => object;
  Instance: new (module: object, imports: object) => { exports: object };
}
const WA = (globalThis as unknown as { WebAssembly: WebAssemblyApi }).WebAssembly;

let compiled: object | undefined;
/** One instance per memory per thread (its globals are the probe's saved place). */
const instances = new WeakMap<object, MapAtomics>();

/** The map steps over `buffer`: WebAssembly's when this thread has the heap's memory, else Atomics'. */
export function mapAtomics(buffer: SharedArrayBuffer, memory: WasmMemory | undefined): MapAtomics {
  const key = memory ?? buffer;
  let a = instances.get(key);
  if (a === undefined) {
    if (memory !== undefined) {
      compiled ??= new WA.Module(encodeMapModule());
      const e = new WA.Instance(compiled, { heap: { memory } }).exports as MapAtomics;
      a = {
        probe: e.probe, probeNext: e.probeNext, release: e.release, retain: e.retain, unlinkEntry: e.unlinkEntry, reserveSteps: e.reserveSteps, linkSteps: e.linkSteps, announce: e.announce, swapSteps: e.swapSteps, findHazard: e.findHazard, findReplacer: e.findReplacer,
        load: e.load, store: e.store, compareExchange: e.compareExchange, exchange: e.exchange,
      };
    } else {
      a = new AtomicsMapSteps(new Int32Array(buffer));
    }
    instances.set(key, a);
  }
  return a;
}

/** The byte address of descriptor `id` (its chunk from the header's directory), as the probe computes it. */
export function descriptorAddress(i32: Int32Array, hdr: number, id: number): number {
  return descriptorAt(i32, (hdr + M_DIRECTORY) >>> 2, id);
}
