/**
 * Which ports the shards listen on together (ShardContext.listen,
 * shard-listen.ts): one SharedArrayBuffer that Smp makes and hands every
 * shard (ShardBootData.listens), so a shard finds, without a message,
 * whether another already has the port, whose descriptor to take a copy
 * of, and the block where the shards of that port take turns at
 * accepting (accept-balance.ts).
 *
 * Layout, Int32 words:
 *   header (16 words): LOCK (0 free, 1 held), GENERATION (bumped and
 *     notified when an entry changes state: shards waiting for a bind
 *     wait on it)
 *   MAX_PORTS entries, each a multiple of 16 words (64 bytes):
 *     STATE      FREE, BINDING (one shard's relay binds it), OPEN
 *     FAMILY     4 or 6; 0 for the default host (every address)
 *     REQUESTED  the port asked for (0: any)
 *     NTH        for port 0: which of each shard's port-0 listens on this
 *                host this is (the first of every shard's share a port,
 *                the second another, ...); -1 for a port asked by number
 *     PORT       the port bound
 *     ID_*       the socket's identity (fstat device and inode, each in
 *                two words): a descriptor taken from a member is checked
 *                against it (the member may have closed it meanwhile)
 *     BINDER     the shard binding it (while BINDING: a binder that dies
 *                frees the entry, so the shards waiting bind themselves)
 *     ADDR_LEN, ADDR  the address, one UTF-16 unit a word
 *     FDS        per shard, its descriptor of the socket, -1 for none: a
 *                shard with one is a member; the entry is freed when the
 *                last member leaves
 *     BALANCE    the accept-balance block, a 64-byte line per shard
 * Every change happens under LOCK, held for a few loads and stores (no
 * call, no await inside): a shard's thread spins, then sleeps 1 ms at a
 * time; the main thread takes it only when a shard dies.
 */
import { acceptWords, clearAcceptLine, ringPaused } from "./accept-balance.js";

/** Ports listened on at once by one runtime's shards. */
export const MAX_PORTS = 32;
/** UTF-16 units of an address (IPv6 with a zone fits). */
const ADDR_CHARS = 64;

const LOCK = 0;
export const GENERATION = 1;
const HEADER_WORDS = 16;

export const FREE = 0;
export const BINDING = 1;
export const OPEN = 2;

const STATE = 0;
const FAMILY = 1;
const REQUESTED = 2;
const NTH = 3;
const PORT = 4;
const ID_DEV_LO = 5;
const ID_DEV_HI = 6;
const ID_INO_LO = 7;
const ID_INO_HI = 8;
const BINDER = 9;
const ADDR_LEN = 10;
const ADDR = 11;
const FDS = ADDR + ADDR_CHARS;

const round16 = (n: number): number => Math.ceil(n / 16) * 16;
const balanceAt = (shards: number): number => round16(FDS + shards);
const entryWords = (shards: number): number => round16(balanceAt(shards) + acceptWords(shards));

/** The buffer for `shards` shards: every entry free. */
export function createListenTable(shards: number): SharedArrayBuffer {
  return new SharedArrayBuffer((HEADER_WORDS + MAX_PORTS * entryWords(shards)) * 4);
}

/** What a listen asks for: the address (family 0 and "" for every address) and the port, or the nth port 0. */
export interface PortKey {
  readonly family: 0 | 4 | 6;
  readonly address: string;
  readonly port: number;
  /** For port 0: the caller's how-manieth port-0 listen on this address (0 first); ignored otherwise. */
  readonly nth: number;
}

/** What an entry holds for a joining shard: the socket and a member's descriptor of it. */
export interface OpenEntry {
  readonly entry: number;
  readonly port: number;
  readonly identity: string;
  /** A member's descriptor (another shard's), or -1 when the entry has none. */
  readonly memberFd: number;
}

export class ListenTable {
  readonly buffer: SharedArrayBuffer;
  private readonly w: Int32Array;
  private readonly shards: number;
  private readonly stride: number;

  constructor(buffer: SharedArrayBuffer, shards: number) {
    if (buffer.byteLength < (HEADER_WORDS + MAX_PORTS * entryWords(shards)) * 4) throw new RangeError(`ListenTable: the buffer is too small for ${shards} shards`);
    this.buffer = buffer;
    this.w = new Int32Array(buffer);
    this.shards = shards;
    this.stride = entryWords(shards);
  }

  /** The byte offset of `entry`'s accept-balance block. */
  balanceOffset(entry: number): number {
    return (this.base(entry) + balanceAt(this.shards)) * 4;
  }

  /** The generation now: wait for it to change (Atomics.waitAsync on GENERATION) to see an entry's state move. */
  generation(): number {
    return Atomics.load(this.w, GENERATION);
  }

  get words(): Int32Array {
    return this.w;
  }

  /**
   * Under the lock: the entry `key` names, as found ("binding": wait for
   * it; "open": join it) or as claimed for `shard` to bind ("claimed");
   * "full" when every entry is taken.
   */
  findOrClaim(key: PortKey, shard: number): { kind: "open"; open: OpenEntry } | { kind: "binding" } | { kind: "claimed"; entry: number } | { kind: "full" } {
    return this.locked(() => {
      let free = -1;
      for (let e = 0; e < MAX_PORTS; e++) {
        const b = this.base(e);
        const state = this.w[b + STATE]!;
        if (state === FREE) {
          if (free < 0) free = e;
          continue;
        }
        if (!this.matches(b, state, key)) continue;
        if (state === BINDING) return { kind: "binding" };
        return { kind: "open", open: this.openEntry(e) };
      }
      if (free < 0) return { kind: "full" };
      this.claim(free, key, shard);
      return { kind: "claimed", entry: free };
    });
  }

  /** The binder's socket is there: the entry is open with `shard` its first member. */
  opened(entry: number, shard: number, fd: number, port: number, identity: string): void {
    this.locked(() => {
      const b = this.base(entry);
      const [dev, ino] = identity.split(":").map(Number) as [number, number];
      this.w[b + PORT] = port;
      this.w[b + ID_DEV_LO] = dev % 2 ** 32 | 0;
      this.w[b + ID_DEV_HI] = Math.floor(dev / 2 ** 32);
      this.w[b + ID_INO_LO] = ino % 2 ** 32 | 0;
      this.w[b + ID_INO_HI] = Math.floor(ino / 2 ** 32);
      this.w[b + FDS + shard] = fd;
      Atomics.store(this.w, b + STATE, OPEN);
    });
    this.bump();
  }

  /** The bind failed: the entry is free again (those waiting for it try themselves). */
  abandon(entry: number): void {
    this.locked(() => void Atomics.store(this.w, this.base(entry) + STATE, FREE));
    this.bump();
  }

  /**
   * `shard` joins the open entry with its own descriptor of the socket, if
   * the entry is still that socket's; false when it has gone meanwhile (or
   * `shard` is a member already).
   */
  join(entry: number, shard: number, fd: number, identity: string): boolean {
    return this.locked(() => {
      const b = this.base(entry);
      if (this.w[b + STATE] !== OPEN || this.identityOf(b) !== identity || this.w[b + FDS + shard]! >= 0) return false;
      this.w[b + FDS + shard] = fd;
      return true;
    });
  }

  /** Whether `shard` is a member of the entry now. */
  isMember(entry: number, shard: number): boolean {
    return Atomics.load(this.w, this.base(entry) + FDS + shard) >= 0;
  }

  /**
   * `shard` leaves the entry (its server closed, or its thread died: the
   * main thread says so): no descriptor, its accept line cleared, the
   * paused shards rung to rebalance without it; the entry is freed with
   * its last member.
   */
  leave(entry: number, shard: number): void {
    const b = this.base(entry);
    let freed = false;
    this.locked(() => {
      if (this.w[b + FDS + shard]! < 0) return;
      this.w[b + FDS + shard] = -1;
      clearAcceptLine(this.w, b + balanceAt(this.shards), shard);
      if (this.members(b) === 0) {
        Atomics.store(this.w, b + STATE, FREE);
        freed = true;
      }
    });
    ringPaused(this.w, b + balanceAt(this.shards), this.shards);
    if (freed) this.bump();
  }

  /** `shard`'s thread died (its handles closed with it): it leaves every entry it was a member of, and frees one it was binding. */
  forgetShard(shard: number): void {
    for (let e = 0; e < MAX_PORTS; e++) {
      const b = this.base(e);
      const state = Atomics.load(this.w, b + STATE);
      if (state === OPEN && this.isMember(e, shard)) this.leave(e, shard);
      else if (state === BINDING && this.locked(() => this.w[b + STATE] === BINDING && this.w[b + BINDER] === shard && (Atomics.store(this.w, b + STATE, FREE), true))) this.bump();
    }
  }

  private openEntry(e: number): OpenEntry {
    const b = this.base(e);
    let memberFd = -1;
    for (let s = 0; s < this.shards && memberFd < 0; s++) memberFd = this.w[b + FDS + s]!;
    return { entry: e, port: this.w[b + PORT]!, identity: this.identityOf(b), memberFd };
  }

  private matches(b: number, state: number, key: PortKey): boolean {
    const w = this.w;
    if (w[b + FAMILY] !== key.family || w[b + ADDR_LEN] !== key.address.length) return false;
    for (let i = 0; i < key.address.length; i++) if (w[b + ADDR + i] !== key.address.charCodeAt(i)) return false;
    if (key.port === 0) return w[b + REQUESTED] === 0 && w[b + NTH] === key.nth;
    // A port asked by number is also the one a port-0 listen was given.
    return state === OPEN ? w[b + PORT] === key.port : w[b + REQUESTED] === key.port;
  }

  private claim(e: number, key: PortKey, shard: number): void {
    if (key.address.length > ADDR_CHARS) throw new RangeError(`listen: an address of at most ${ADDR_CHARS} characters, got ${key.address.length}`);
    const b = this.base(e);
    const w = this.w;
    w.fill(0, b, b + this.stride);
    w.fill(-1, b + FDS, b + FDS + this.shards);
    w[b + FAMILY] = key.family;
    w[b + REQUESTED] = key.port;
    w[b + NTH] = key.port === 0 ? key.nth : -1;
    w[b + BINDER] = shard;
    w[b + ADDR_LEN] = key.address.length;
    for (let i = 0; i < key.address.length; i++) w[b + ADDR + i] = key.address.charCodeAt(i);
    Atomics.store(w, b + STATE, BINDING);
  }

  private members(b: number): number {
    let n = 0;
    for (let s = 0; s < this.shards; s++) if (this.w[b + FDS + s]! >= 0) n++;
    return n;
  }

  private identityOf(b: number): string {
    const w = this.w;
    const dev = (w[b + ID_DEV_HI]! >>> 0) * 2 ** 32 + (w[b + ID_DEV_LO]! >>> 0);
    const ino = (w[b + ID_INO_HI]! >>> 0) * 2 ** 32 + (w[b + ID_INO_LO]! >>> 0);
    return `${dev}:${ino}`;
  }

  private base(entry: number): number {
    return HEADER_WORDS + entry * this.stride;
  }

  private bump(): void {
    Atomics.add(this.w, GENERATION, 1);
    Atomics.notify(this.w, GENERATION);
  }

  /** `f` with the lock held (a spin, then 1 ms sleeps: held for a few stores at a time). */
  private locked<T>(f: () => T): T {
    for (let spins = 0; Atomics.compareExchange(this.w, LOCK, 0, 1) !== 0; spins++) {
      if (spins > 1000) Atomics.wait(this.w, LOCK, 1, 1);
    }
    try {
      return f();
    } finally {
      Atomics.store(this.w, LOCK, 0);
      Atomics.notify(this.w, LOCK, 1);
    }
  }
}
