/**
 * Which shard owns a key: FNV-1a (32-bit) of its bytes (the key as a
 * latin1 string: one char per byte), modulo the number of shards. Every
 * thread computes the same answer, so any shard can route a request
 * without asking anyone (Seastar's memcached: hash % smp::count).
 */
export function keyOwner(key: string, shards: number): number {
  if (shards === 1) return 0;
  let h = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x01000193);
  return (h >>> 0) % shards;
}
