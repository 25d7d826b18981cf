// The shards' tasks: every exported function (arg, shard) => result is a
// task. Each word is counted by the shard that owns it (a hash of the
// word), so a line's words travel to their owners, shard to shard.
import { shardContext, type ShardContext } from "shardheap";

export interface WordCount {
  word: string;
  count: number;
}

/** This shard's words. */
const counts = new Map<string, number>();
/**
 * This module's own tasks, typed, as calls to other shards. shardContext()
 * throws on a thread that is no shard's; this module only loads in shards.
 * Not exported: TypeScript cannot type an export that refers to itself.
 */
const tasks = shardContext().tasks<typeof import("./tasks.js")>();

function ownerOf(word: string, shards: number): number {
  let h = 0;
  for (let i = 0; i < word.length; i++) h = (Math.imul(h, 31) + word.charCodeAt(i)) | 0;
  return (h >>> 0) % shards;
}

/** Count a line's words, each on its owner; resolves with how many there were. */
export async function countLine(line: string, shard: ShardContext): Promise<number> {
  const words = line.toLowerCase().match(/[a-z']+/g) ?? [];
  await Promise.all(words.map((word) => tasks.add(ownerOf(word, shard.shards), word)));
  return words.length;
}

export function add(word: string): void {
  counts.set(word, (counts.get(word) ?? 0) + 1);
}

/** This shard's `n` most counted words. */
export function top(n: number): WordCount[] {
  return [...counts].map(([word, count]) => ({ word, count })).sort((a, b) => b.count - a.count || a.word.localeCompare(b.word)).slice(0, n);
}

/** A string in the shared heap, read in place, answered with a new one: pointers are plain numbers. */
export function shout(text: number, shard: ShardContext): number {
  return shard.memory.mallocString(`${shard.heap.storedString(text).toUpperCase()}!`);
}
