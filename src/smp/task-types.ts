/**
 * The contract between a task module and its callers, in types: what a
 * task gets (ShardContext: its second argument, and `currentShard`), what
 * a task is (an exported function run as `task(arg, shard)`), and
 * `Tasks<M>`, a module's exports seen as typed calls:
 *
 *   const kv = smp.tasks<typeof import("./kv-tasks.js")>();
 *   await kv.put(0, { key, value });      // put's argument and result types
 *   await kv.count.onAll();               // invokeOnAll: number[], in shard order
 *
 * Types only: the calls are made by typed-tasks.ts, through submitTo and
 * invokeOnAll, so a typed call behaves exactly as the untyped one (cloning,
 * errors, order). What the types add is at compile time: a wrong argument,
 * a wrong result or a name the module does not export fails to compile
 * (test/typed-tasks-compile.test.ts compiles both kinds under strict,
 * exactOptionalPropertyTypes and noUncheckedIndexedAccess against the
 * packed package).
 *
 * Why a type argument and not `Smp.start<M>`: a module is named by a URL
 * or path at run time, which the compiler cannot follow; `typeof import()`
 * is the one place the caller names the same file to the compiler.
 */
import type { Server } from "node:net";
import type { ShardAllocator } from "../memory/shard-allocator.js";
import type { SharedHeap } from "../memory/shared-heap.js";
import type { ListeningAddress, ListenOptions } from "./shard-listen.js";

export type { ListeningAddress, ListenOptions } from "./shard-listen.js";

export interface ShardContext {
  /** This shard's id, 0 .. shards - 1. */
  readonly id: number;
  /** How many shards there are. */
  readonly shards: number;
  /** This shard's allocator: malloc and free here. */
  readonly memory: ShardAllocator;
  /** The whole heap (every shard's memory is readable; allocate only through `memory`). */
  readonly heap: SharedHeap;
  /**
   * Run the module's exported function `task` on `shard` (any shard, this
   * one included) with `arg`, as Smp.submitTo does from the main thread:
   * `arg` and the result are structured-cloned, calls from this shard to
   * one shard start in the order made, the task's error comes back rebuilt.
   * Rejects with a RangeError for an unknown shard, a ShardError when the
   * shard is down.
   */
  submitTo<T = unknown>(shard: number, task: string, arg?: unknown): Promise<T>;
  /** Run `task` on every shard (this one included); results in shard order, or the first error. */
  invokeOnAll<T = unknown>(task: string, arg?: unknown): Promise<T[]>;
  /**
   * The module's tasks as typed calls (Tasks): `tasks<typeof import("./tasks.js")>()`.
   * The same object every time; usable from the module's top level on.
   */
  tasks<M extends object = NoTaskModuleNamed>(): Tasks<M>;
  /**
   * Serve one port from every shard: each shard that calls this with its
   * own `server` (an http.Server is a net.Server) listens on the same
   * socket, and connections are spread evenly over the shards listening
   * (they take turns at accepting, by their counts of live connections).
   * The first shard to ask binds the port; `port: 0` picks one free port
   * for all (the nth port-0 listen of every shard shares one). Closing a
   * shard's server leaves the port to the others; it is free again once
   * the last has closed. Resolves with the port and address bound; rejects
   * as net.Server.listen does for a port in use (`listen EADDRINUSE:
   * address already in use ...`). Node 20 and up on Linux and other POSIX
   * systems (Windows has no descriptor passing).
   */
  listen(server: Server, o: ListenOptions): Promise<ListeningAddress>;
}

/**
 * A task: an exported function that a shard runs as `task(arg, shard)`.
 * A function whose second parameter cannot take a ShardContext, or that
 * needs more than two arguments, is no task (calling it would hand it
 * the wrong things), so Tasks leaves it out.
 */
export type TaskFunction = (arg: never, shard: ShardContext) => unknown;

/**
 * The names of M's exports that are tasks. `then` is left out: an object
 * with a `then` is taken for a promise (await, Promise.resolve), so the
 * typed object has none; submitTo still reaches such an export.
 */
export type TaskName<M> = {
  [K in keyof M]-?: K extends string ? (K extends "then" ? never : M[K] extends TaskFunction ? K : never) : never;
}[keyof M];

/**
 * What follows the shard in a call of task F: nothing when F takes no
 * argument, an optional argument when its first parameter is optional or
 * accepts undefined, else the argument.
 */
export type TaskArgument<F> = F extends (...args: infer P) => unknown
  ? P extends readonly []
    ? []
    : P extends readonly [infer A, ...unknown[]]
      ? undefined extends A
        ? [arg?: A]
        : [arg: A]
      : P extends readonly [(infer A)?, ...unknown[]]
        ? [arg?: A]
        : never
  : never;

/**
 * What a call of task F resolves with: F's result, awaited. It arrives as
 * a structured clone (as through postMessage): a class instance as a
 * plain object with its own fields, a function not at all (the call
 * rejects naming the task).
 */
export type TaskResult<F> = F extends (...args: never) => infer R ? Awaited<R> : never;

/** One task as a call: `kv.put(shard, arg)` is `submitTo(shard, "put", arg)`. */
export interface TaskCall<F> {
  (shard: number, ...arg: TaskArgument<F>): Promise<TaskResult<F>>;
  /** `invokeOnAll("put", arg)`: every shard at once; the results in shard order, or the first error. */
  onAll(...arg: TaskArgument<F>): Promise<Array<TaskResult<F>>>;
}

/** A task module's exports (`typeof import("./tasks.js")`) as typed calls. */
export type Tasks<M> = { readonly [K in TaskName<M>]: TaskCall<M[K]> };

/**
 * tasks() without a type argument: no module named, so no task is known
 * and every call fails to compile, as "Property 'put' does not exist on
 * type 'Tasks<NoTaskModuleNamed>'". Name it: tasks<typeof import("./tasks.js")>().
 */
export interface NoTaskModuleNamed {}
