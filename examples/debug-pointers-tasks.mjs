// Tasks for debug-pointers.mjs: a session store whose cache keeps a
// pointer after the store freed its object (the bug to find).
const sessions = new Map(); // user -> pointer, on the shard that owns the sessions

export function login(user, shard) {
  const ptr = shard.memory.mallocString(JSON.stringify({ user, cart: [] }));
  sessions.set(user, ptr);
  return ptr;
}
export function logout(user, shard) {
  shard.memory.free(sessions.get(user));
  sessions.delete(user);
}
/** Reads a session by a pointer some cache kept: stale once the user logged out. */
export function read(ptr, shard) {
  return JSON.parse(shard.heap.storedString(ptr)).user;
}
