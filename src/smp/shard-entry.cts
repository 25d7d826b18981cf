/**
 * The file piscina starts every shard's thread with (smp.ts, WORKER_FILE).
 *
 * piscina loads a worker file with require() first and with import() only
 * if that throws (piscina/dist/worker.js, getHandler). On Node 20.19 and
 * later require() of an ES module works (require(esm)), so the shard's
 * bootstrap, an ES module, was loaded that way, and one full `npm test`
 * run aborted a whole test process there: "FATAL ERROR:
 * v8::Module::IsGraphAsync must be used on an instantiated module", from
 * ModuleWrap::InstantiateSync under require() (Node's require(esm) cannot
 * handle a module graph it finds not yet instantiated; nodejs/node#55782
 * and #59703 track the races). An abort is no error anyone can catch. So
 * the file piscina requires is this CommonJS one: it loads the bootstrap
 * with import() and gives piscina a promise of its handler, which piscina
 * awaits as the handler. No shard thread uses require(esm) at all.
 */
export = import("./shard-worker.js").then((m) => m.default);
