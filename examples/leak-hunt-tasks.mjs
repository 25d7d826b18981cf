// Tasks for leak-hunt.mjs: a request handler with a leak. Every request
// allocates a buffer it frees when done (steady), and remembers its
// response in a cache that nothing ever evicts (the leak).
const responses = new Map(); // request id -> pointer: grows for ever

function readBody(shard) {
  return shard.memory.malloc(8192); // freed at the end of the request
}
function rememberResponse(id, shard) {
  responses.set(id, shard.memory.mallocString(`response to request ${id}`.padEnd(200, "."))); // never freed: the leak
}

export function handle({ from, count }, shard) {
  for (let id = from; id < from + count; id++) {
    const body = readBody(shard);
    rememberResponse(id, shard);
    shard.memory.free(body);
  }
}

export function clear(_arg, shard) {
  for (const p of responses.values()) shard.memory.free(p);
  responses.clear();
}
