/**
 * The calls one endpoint has made and not yet seen settle. endpoint.ts
 * takes an id before it sends a call's record (Outgoing.sendRequest) and
 * opens the call here once the record is sent; Incoming (incoming.ts)
 * settles it with its answer; PeerDeaths (peer-deaths.ts) rejects those
 * pending on a peer that died, and Endpoint.stop those left at the end.
 * Also kept here: the bound on calls pending to one peer
 * (maxPendingCalls), and the main thread's keep-alive while any call is
 * pending.
 *
 * What a pending call costs its sender: ~190 B. 266 B were measured with
 * 1M calls pending, of which the reject function every promise's executor
 * gets, kept for the rare error, was 64 B, and five JS arrays of slots
 * 40 B. So only the resolve function is kept (a rejection resolves the
 * promise with a rejected one), and the rest is CALL_WORDS int32s per id.
 */

/** Int32s a pending call keeps: its peer, the number of its record in the peer's stream (Outgoing.records), its task id there. */
const CALL_WORDS = 3;

export class PendingCalls {
  /** Per call id, its promise's resolve function while pending (a slot; reused once settled). */
  private resolves: Array<((v: unknown) => void) | undefined> = [];
  /** Per call id, CALL_WORDS int32s (see CALL_WORDS). */
  private words = new Int32Array(CALL_WORDS * 256);
  /** Ids handed out so far (the next new one). */
  private ids = 0;
  private freeIds: number[] = [];
  /** Calls pending per peer. */
  private readonly pendingTo: number[];
  /** Calls pending in all. */
  private pending = 0;
  private settledWaiters: Array<Array<() => void> | undefined> = [];
  private readonly keepAlive: NodeJS.Timeout | undefined;

  /**
   * @param endpoints peers a call can go to
   * @param maxPending calls one peer may have pending from this endpoint (Smp.start's maxPendingCalls); Infinity: no bound
   * @param keepAlive hold the process open while calls are pending (the main thread: piscina unrefs idle workers)
   */
  constructor(
    endpoints: number,
    readonly maxPending: number,
    keepAlive: boolean,
  ) {
    this.pendingTo = new Array<number>(endpoints).fill(0);
    if (keepAlive) {
      this.keepAlive = setInterval(() => undefined, 1 << 30);
      this.keepAlive.unref();
    }
  }

  /** Calls pending in all. */
  get count(): number {
    return this.pending;
  }

  /** Calls pending on `peer`. */
  pendingOn(peer: number): number {
    return this.pendingTo[peer]!;
  }

  /** Is `peer` at its bound (a new call would be refused)? */
  atBound(peer: number): boolean {
    return this.pendingTo[peer]! >= this.maxPending;
  }

  /** Resolves once no call is pending on `peer`. */
  settledOn(peer: number): Promise<void> {
    if (this.pendingTo[peer] === 0) return Promise.resolve();
    return new Promise((resolve) => (this.settledWaiters[peer] ??= []).push(resolve));
  }

  /**
   * An id for a call about to be sent: taken before its record is encoded,
   * so a call made from inside that encoding (a getter calling submitTo)
   * gets another.
   */
  takeId(): number {
    return this.freeIds.length > 0 ? this.freeIds.pop()! : this.newId();
  }

  /** The call given `id` was not sent after all. */
  returnId(id: number): void {
    this.freeIds.push(id);
  }

  /** Call `id` was sent to `peer` as record number `record` of its stream, for task id `taskId` there: its promise. */
  open(id: number, peer: number, record: number, taskId: number): Promise<unknown> {
    const at = id * CALL_WORDS; // `words` read now: a call made while this one's record was encoded may have grown it
    this.words[at] = peer;
    this.words[at + 1] = record;
    this.words[at + 2] = taskId;
    // One executor for every call (it stores the resolver here): a
    // closure per call is one more allocation on the hottest path.
    const promise = new Promise<unknown>(this.executor);
    this.resolves[id] = this.nextResolve;
    this.pendingTo[peer]!++;
    if (this.pending++ === 0) this.keepAlive?.ref();
    return promise;
  }

  private nextResolve: ((v: unknown) => void) | undefined;
  private readonly executor = (resolve: (v: unknown) => void): void => {
    this.nextResolve = resolve;
  };

  /** A call id never handed out before (the slots grow by doubling). */
  private newId(): number {
    const id = this.ids++;
    if ((id + 1) * CALL_WORDS > this.words.length) {
      const bigger = new Int32Array(this.words.length * 2);
      bigger.set(this.words);
      this.words = bigger;
    }
    return id;
  }

  /** Is call `id` pending, on `peer`? (An answer for any other is stale: the call was settled when the peer went down.) */
  isPendingOn(id: number, peer: number): boolean {
    return this.resolves[id] !== undefined && this.peerOf(id) === peer;
  }

  peerOf(id: number): number {
    return this.words[id * CALL_WORDS]!;
  }

  /** The number of call `id`'s record in its peer's stream. */
  recordOf(id: number): number {
    return this.words[id * CALL_WORDS + 1]!;
  }

  /** Call `id`'s task id on its peer's pair (Outgoing.taskName gives the name). */
  taskIdOf(id: number): number {
    return this.words[id * CALL_WORDS + 2]!;
  }

  /** Resolve (ok) or reject pending call `id` with `value`. */
  settle(id: number, ok: boolean, value: unknown): void {
    const resolve = this.resolves[id]!;
    const peer = this.peerOf(id);
    this.resolves[id] = undefined;
    this.freeIds.push(id);
    if (--this.pendingTo[peer]! === 0) {
      const waiters = this.settledWaiters[peer];
      if (waiters !== undefined) {
        this.settledWaiters[peer] = undefined;
        for (const w of waiters) w();
      }
    }
    if (--this.pending === 0) this.keepAlive?.unref();
    // A rejection resolves with a rejected promise (its handler is added in
    // the same microtask drain: no unhandled-rejection report).
    resolve(ok ? value : Promise.reject(value));
  }

  /** Reject every call pending on `peer` (every pending call when `peer` is undefined) with why(id). */
  rejectPending(peer: number | undefined, why: (id: number) => Error): void {
    for (let id = 0; id < this.ids; id++) {
      if (this.resolves[id] !== undefined && (peer === undefined || this.peerOf(id) === peer)) this.settle(id, false, why(id));
    }
  }

  /** No more keep-alive (the endpoint stopped). */
  stop(): void {
    if (this.keepAlive) clearInterval(this.keepAlive);
  }
}
