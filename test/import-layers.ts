/**
 * The layer check behind test/layers.test.ts: reads every import of src/
 * (static `import ... from`, `export ... from`, `import "x"`, dynamic
 * `import("x")`, type-only imports too) with TypeScript's own pre-parser,
 * so comments and strings that merely look like imports are not counted,
 * and reports
 *   - every import circle (two or more files reaching each other),
 *   - every import from a higher layer (docs/ARCHITECTURE.md "Layers"), and
 *   - every import between the rooms of a layer (its sub-folders) that
 *     ROOMS below does not allow.
 * Only relative specifiers are followed: packages (node:*, piscina, ...)
 * sit outside the layers. A dynamic import of a computed specifier (the
 * shard bootstrap's `import(boot.module)`, the user's code) has no target.
 *
 * Layers, lowest first; a file may import its own layer or a lower one:
 *   base     src/errors.ts, src/units.ts, src/parse.ts, src/log.ts,
 *            src/frame-path.ts, src/display-text.ts: utilities every layer uses; they import no layer
 *   memory   src/memory/   the allocator; in sub-folders (rooms, below) the
 *                          shared index, the profiler's recording side, heap images
 *   smp      src/smp/      shards on worker threads
 *   report   src/report/   renderers of a HeapProfile
 *   runtime  src/runtime/  flags -> options, admin HTTP API, metrics
 *   apps     src/apps/     programs built on the runtime (stress)
 *   top      src/cli.ts, src/index.ts: the command and the package root
 * A file in src/ that is in none of these is itself a finding, so a new
 * root file has to be placed here on purpose.
 *
 * Rooms, inside a layer (docs/ARCHITECTURE.md "Layers"): a layer listed in ROOMS has
 * each of its folders as a room, and a file may import from its own room
 * and from the rooms its room lists, nothing else of its layer. A folder
 * of that layer that ROOMS does not list is itself a finding.
 *   memory             the allocator's own files: import none of the rooms below
 *   memory/profiler    the profiler's recording side: builds on the allocator
 *   memory/heap-image  heap images: the allocator, and the profiler's tables they carry
 *   memory/shared-map  the shared index: builds on the allocator
 *   apps/stress        `shardheap stress`: none of memcached's rooms
 *   apps/memcached     the command and its assembly (run, flags, server, shard,
 *                      config.ts): every room of memcached's below
 *   .../protocol       reading requests (lines, data blocks, the meta protocol):
 *                      none of the rooms, not the config
 *   .../stats          counters and the stats answers: the protocol's words, config.ts
 *   .../store          the items, their memory, order and index: protocol's
 *                      words (modes, exptimes), the counters; never a command,
 *                      a connection or the config
 *   .../commands       the classic and meta commands: store, stats, protocol, config.ts
 *   .../network        a connection's socket, backpressure, the listener: all of
 *                      the above
 * A room may list a file of another room ("apps/memcached/config.ts": what
 * every shard is told) instead of the whole room.
 */
import { readFileSync, readdirSync } from "node:fs";
import { dirname, join, normalize, relative, sep } from "node:path";
import ts from "typescript";

export const LAYERS = ["base", "memory", "smp", "report", "runtime", "apps", "top"] as const;
export type Layer = (typeof LAYERS)[number];

const ROOT_FILES: Record<string, Layer> = {
  "errors.ts": "base",
  "units.ts": "base",
  "parse.ts": "base",
  "log.ts": "base",
  "frame-path.ts": "base",
  "display-text.ts": "base",
  "cli.ts": "top",
  "index.ts": "top",
};

/** Each room (a folder under src/) of a layer that has rooms, and the rooms (or single files of one) it may import besides itself. */
export const ROOMS: Readonly<Record<string, readonly string[]>> = {
  memory: [],
  "memory/profiler": ["memory"],
  "memory/heap-image": ["memory", "memory/profiler"],
  "memory/shared-map": ["memory"],
  "apps/stress": [],
  "apps/memcached": ["apps/memcached/protocol", "apps/memcached/stats", "apps/memcached/store", "apps/memcached/commands", "apps/memcached/network"],
  "apps/memcached/protocol": [],
  "apps/memcached/stats": ["apps/memcached/config.ts", "apps/memcached/protocol"],
  "apps/memcached/store": ["apps/memcached/protocol", "apps/memcached/stats"],
  "apps/memcached/commands": ["apps/memcached/config.ts", "apps/memcached/protocol", "apps/memcached/stats", "apps/memcached/store"],
  "apps/memcached/network": ["apps/memcached/config.ts", "apps/memcached/protocol", "apps/memcached/stats", "apps/memcached/store", "apps/memcached/commands"],
};

/** The layer of a path relative to src/ ("memory/layout.ts"), or undefined when it has none. */
export function layerOf(file: string): Layer | undefined {
  const parts = file.split("/");
  if (parts.length === 1) return ROOT_FILES[parts[0]!];
  const folder = parts[0] as Layer;
  return folder !== "base" && folder !== "top" && LAYERS.includes(folder) ? folder : undefined;
}

/** File (relative to src/, "/" separators) -> the src files it imports. */
export type ImportGraph = Map<string, string[]>;

/** The relative specifiers a source text imports, in order. */
export function importSpecifiers(source: string): string[] {
  return ts
    .preProcessFile(source, true, true)
    .importedFiles.map((f) => f.fileName)
    .filter((s) => s.startsWith("./") || s.startsWith("../"));
}

/** Every .ts file under `srcDir` and what it imports (".js" specifiers name the ".ts" sources, as NodeNext requires). */
export function readImportGraph(srcDir: string): ImportGraph {
  const graph: ImportGraph = new Map();
  const walk = (dir: string): void => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.name.endsWith(".ts") && !entry.name.endsWith(".d.ts")) {
        const from = relative(srcDir, path).split(sep).join("/");
        const targets = importSpecifiers(readFileSync(path, "utf8")).map((s) =>
          relative(srcDir, normalize(join(dirname(path), s.replace(/\.js$/, ".ts")))).split(sep).join("/"),
        );
        graph.set(from, [...new Set(targets)]);
      }
    }
  };
  walk(srcDir);
  return graph;
}

/**
 * Every import circle, each as the files on it in import order (first file
 * repeated at the end). Tarjan's strongly connected components: a
 * component of two or more files, or a file importing itself, is a circle.
 */
export function findCircles(graph: ImportGraph): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const circles: string[][] = [];
  let next = 0;
  const visit = (v: string): void => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) {
        low.set(v, Math.min(low.get(v)!, index.get(w)!));
      }
    }
    if (low.get(v) !== index.get(v)) return;
    const component: string[] = [];
    let w: string;
    do {
      w = stack.pop()!;
      onStack.delete(w);
      component.push(w);
    } while (w !== v);
    if (component.length > 1 || (graph.get(v) ?? []).includes(v)) circles.push(pathThrough(graph, new Set(component), v));
  };
  for (const v of [...graph.keys()].sort()) if (!index.has(v)) visit(v);
  return circles;
}

/** One circle through `start` inside `component`, for the message (breadth-first, so the shortest). */
function pathThrough(graph: ImportGraph, component: Set<string>, start: string): string[] {
  const cameFrom = new Map<string, string>();
  const queue = [start];
  while (queue.length > 0) {
    const v = queue.shift()!;
    for (const w of graph.get(v) ?? []) {
      if (!component.has(w)) continue;
      if (w === start) {
        const path = [v];
        while (path[0] !== start) path.unshift(cameFrom.get(path[0]!)!);
        return [...path, start];
      }
      if (!cameFrom.has(w)) {
        cameFrom.set(w, v);
        queue.push(w);
      }
    }
  }
  return [start, start];
}

/** Imports that reach a higher layer, and files in no layer, as messages. */
export function findLayerViolations(graph: ImportGraph): string[] {
  const problems: string[] = [];
  for (const [from, targets] of graph) {
    const own = layerOf(from);
    if (own === undefined) {
      problems.push(`${from} is in no layer (place it in test/import-layers.ts and docs/ARCHITECTURE.md's layers)`);
      continue;
    }
    for (const to of targets) {
      const theirs = layerOf(to);
      if (theirs === undefined) problems.push(`${from} imports ${to}, which is in no layer`);
      else if (LAYERS.indexOf(theirs) > LAYERS.indexOf(own)) problems.push(`${from} (${own}) imports ${to} (${theirs}), a higher layer`);
    }
  }
  return problems;
}

/** The room of a path relative to src/ ("memory/profiler/peaks.ts" -> "memory/profiler"): its folder. */
export function roomOf(file: string): string {
  const slash = file.lastIndexOf("/");
  return slash < 0 ? "" : file.slice(0, slash);
}

/** Whether a layer has rooms (ROOMS lists a room of it). */
function hasRooms(layer: Layer | undefined, rooms: Readonly<Record<string, readonly string[]>>): boolean {
  return layer !== undefined && Object.keys(rooms).some((room) => room.split("/")[0] === layer);
}

/**
 * Imports inside a layer that go from one room to another that ROOMS does
 * not let it import, and files of a layer with rooms whose folder is not
 * one, as messages. Imports across layers are findLayerViolations' to judge.
 */
export function findRoomViolations(graph: ImportGraph, rooms: Readonly<Record<string, readonly string[]>> = ROOMS): string[] {
  const problems: string[] = [];
  for (const [from, targets] of graph) {
    const layer = layerOf(from);
    if (!hasRooms(layer, rooms)) continue;
    const room = roomOf(from);
    const allowed = rooms[room];
    if (allowed === undefined) {
      problems.push(`${from} is in no room of ${layer} (place ${room}/ in test/import-layers.ts ROOMS and docs/ARCHITECTURE.md)`);
      continue;
    }
    for (const to of targets) {
      const theirs = roomOf(to);
      if (layerOf(to) !== layer || theirs === room || allowed.includes(theirs) || allowed.includes(to)) continue;
      problems.push(`${from} (${room}) imports ${to} (${theirs}), a room ${room} may not import`);
    }
  }
  return problems;
}
