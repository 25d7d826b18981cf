/**
 * The fragmentation benchmark's reference allocator (bench code only):
 * address-ordered best fit over one fixed arena, the policy Johnstone and
 * Wilson ("The Memory Fragmentation Problem: Solved?", ISMM 1998) found to
 * waste the least on real programs' traces.
 *
 * A request takes the smallest free block that holds it, the lowest-
 * addressed of those when several tie; the block is split and its tail
 * stays free; a freed block merges with free neighbours on both sides at
 * once. Every block pays an 8-byte boundary tag (what dlmalloc and TLSF
 * pay to coalesce), sizes are whole 8-byte granules, 16 bytes at least.
 * It keeps nothing else: no size classes, no caches, no metadata in the
 * arena. Free blocks sit in a treap ordered by (size, address), so a
 * best-fit search is one descent.
 */

const GRANULE = 8;
const HEADER = 8;
const MIN_BLOCK_GRANULES = 2;

/** A treap of free blocks keyed by (size, start), both in granules; nodes in typed arrays. */
class FreeBlockTree {
  private size = new Int32Array(1024);
  private start = new Int32Array(1024);
  private left = new Int32Array(1024);
  private right = new Int32Array(1024);
  private priority = new Uint32Array(1024);
  private root = -1;
  private unused: number[] = [];
  private count = 0;
  private rng = 0x9e3779b9;

  private node(size: number, start: number): number {
    let n = this.unused.pop();
    if (n === undefined) {
      n = this.count++;
      if (n === this.size.length) this.grow();
    }
    this.size[n] = size;
    this.start[n] = start;
    this.left[n] = -1;
    this.right[n] = -1;
    this.rng ^= this.rng << 13;
    this.rng ^= this.rng >>> 17;
    this.rng ^= this.rng << 5;
    this.priority[n] = this.rng >>> 0;
    return n;
  }

  private grow(): void {
    const more = <T extends Int32Array | Uint32Array>(a: T): T => {
      const b = new (a.constructor as new (n: number) => T)(a.length * 2);
      b.set(a);
      return b;
    };
    this.size = more(this.size);
    this.start = more(this.start);
    this.left = more(this.left);
    this.right = more(this.right);
    this.priority = more(this.priority);
  }

  private less(n: number, size: number, start: number): boolean {
    return this.size[n]! < size || (this.size[n] === size && this.start[n]! < start);
  }

  /** Split subtree t into keys < (size, start) and keys >= it. */
  private split(t: number, size: number, start: number): [number, number] {
    if (t < 0) return [-1, -1];
    if (this.less(t, size, start)) {
      const [l, r] = this.split(this.right[t]!, size, start);
      this.right[t] = l;
      return [t, r];
    }
    const [l, r] = this.split(this.left[t]!, size, start);
    this.left[t] = r;
    return [l, t];
  }

  private merge(a: number, b: number): number {
    if (a < 0) return b;
    if (b < 0) return a;
    if (this.priority[a]! > this.priority[b]!) {
      this.right[a] = this.merge(this.right[a]!, b);
      return a;
    }
    this.left[b] = this.merge(a, this.left[b]!);
    return b;
  }

  insert(size: number, start: number): void {
    const n = this.node(size, start);
    const [l, r] = this.split(this.root, size, start);
    this.root = this.merge(this.merge(l, n), r);
  }

  remove(size: number, start: number): void {
    const [l, r] = this.split(this.root, size, start);
    const [mid, rest] = this.split(r, size, start + 1);
    if (mid < 0 || this.left[mid]! >= 0 || this.right[mid]! >= 0) throw new Error("reference allocator: free block missing from its tree");
    this.unused.push(mid);
    this.root = this.merge(l, rest);
  }

  /** The smallest block of at least `size` granules, lowest address first: [size, start], or undefined. */
  bestFit(size: number): [number, number] | undefined {
    let best = -1;
    for (let t = this.root; t >= 0; ) {
      if (this.size[t]! >= size) {
        best = t;
        t = this.left[t]!;
      } else {
        t = this.right[t]!;
      }
    }
    return best < 0 ? undefined : [this.size[best]!, this.start[best]!];
  }

  clear(): void {
    this.root = -1;
    this.unused = [];
    this.count = 0;
  }
}

/** Address-ordered best fit over an arena of `bytes` bytes. malloc returns a block handle, or -1 when nothing fits. */
export class BestFitArena {
  private readonly tree = new FreeBlockTree();
  /** Per granule that starts a block: its size in granules, positive when free, negative when used. */
  private blockSize = new Int32Array(0);
  /** Per granule that ends a free block: where the block starts. */
  private startOfEnd = new Int32Array(0);
  private granules = 0;

  /** Start over with an empty arena of `bytes` bytes. */
  reset(bytes: number): void {
    this.granules = Math.floor(bytes / GRANULE);
    if (this.granules > this.blockSize.length) {
      this.blockSize = new Int32Array(this.granules);
      this.startOfEnd = new Int32Array(this.granules);
    }
    this.blockSize.fill(0, 0, this.granules);
    this.tree.clear();
    this.addFree(0, this.granules);
  }

  private addFree(start: number, size: number): void {
    this.blockSize[start] = size;
    this.startOfEnd[start + size - 1] = start;
    this.tree.insert(size, start);
  }

  /** Allocate `bytes`; returns the block's first granule, or -1. */
  malloc(bytes: number): number {
    const need = Math.max(MIN_BLOCK_GRANULES, Math.ceil((bytes + HEADER) / GRANULE));
    const fit = this.tree.bestFit(need);
    if (fit === undefined) return -1;
    const [size, start] = fit;
    this.tree.remove(size, start);
    if (size - need >= MIN_BLOCK_GRANULES) {
      this.addFree(start + need, size - need);
      this.blockSize[start] = -need;
    } else {
      this.blockSize[start] = -size;
    }
    return start;
  }

  free(start: number): void {
    let size = -this.blockSize[start]!;
    if (!(size > 0)) throw new Error(`reference allocator: free of ${start}, not a used block`);
    const right = start + size;
    if (right < this.granules && this.blockSize[right]! > 0) {
      this.tree.remove(this.blockSize[right]!, right);
      size += this.blockSize[right]!;
      this.blockSize[right] = 0;
    }
    if (start > 0) {
      const left = this.startOfEnd[start - 1]!;
      if (this.blockSize[left]! > 0 && left + this.blockSize[left]! === start) {
        this.tree.remove(this.blockSize[left]!, left);
        size += this.blockSize[left]!;
        this.blockSize[start] = 0;
        start = left;
      }
    }
    this.addFree(start, size);
  }
}
