/**
 * The object behind `smp.tasks<M>()` and `currentShard.tasks<M>()`
 * (task-types.ts has its types): `tasks.put(shard, arg)` is
 * `caller.submitTo(shard, "put", arg)` and `tasks.put.onAll(arg)` is
 * `caller.invokeOnAll("put", arg)`, so every check, error and ordering rule
 * of those calls holds unchanged. The caller does not know the module's
 * exports (they live in the shards, and a module may call its own tasks
 * from its top level, before its exports exist), so the object is a Proxy
 * that makes a name's call on first use and keeps it: `tasks.put` is the
 * same function every time, and a name the module lacks rejects when
 * called, naming the task, as submitTo does.
 *
 * Cost: one more call frame once a name has been used (below);
 * `npm run bench -- --filter messaging` has the typed call beside
 * submitTo ("typed main->shard").
 */
import type { Tasks } from "./task-types.js";

/** What the typed calls go through: Smp, or a shard's context. */
export interface TaskCaller {
  submitTo(shard: number, task: string, arg?: unknown): Promise<unknown>;
  invokeOnAll(task: string, arg?: unknown): Promise<unknown[]>;
}

interface UntypedCall {
  (shard: number, arg?: unknown): Promise<unknown>;
  onAll(arg?: unknown): Promise<unknown[]>;
}

/** One typed-tasks object for `caller`; the type argument is the caller's to give (Smp.tasks, ShardContext.tasks). */
export function typedTasks<M extends object>(caller: TaskCaller): Tasks<M> {
  // The object's prototype is the Proxy: a name's first read misses the
  // object and reaches the trap, which makes its call and defines it on
  // the object, so every later read is a plain own property (the trap on
  // every read cost ~50 ns a call, 5M calls to a caller that does
  // nothing: submitTo 1 ns, typed 50 ns; as an own property 10 ns, what
  // the one more call frame costs. A pipelined call costs 2.7-5 us.
  const calls: ProxyHandler<object> = {
    get(_target, name, receiver: object) {
      // Symbols (util.inspect, Symbol.toPrimitive) and `then` (await and
      // Promise.resolve look for it) are no task names.
      if (typeof name !== "string" || name === "then") return undefined;
      const call: UntypedCall = Object.assign((shard: number, arg?: unknown) => caller.submitTo(shard, name, arg), {
        onAll: (arg?: unknown) => caller.invokeOnAll(name, arg),
      });
      Object.defineProperty(receiver, name, { value: call, enumerable: true });
      return call;
    },
  };
  return Object.create(new Proxy(Object.create(null) as object, calls)) as Tasks<M>;
}
