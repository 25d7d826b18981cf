// Typed tasks in a TypeScript project: `npm install`, `npx tsc`, `npm start`
// (or, without compiling, `npx tsx src/main.ts`). smp.tasks<M>() with the
// task module's type gives every call its argument and result types.
// Output: counted 19 words on shard 0's request
// Output: top words: the 4, and 2, heap 2
// Output: shard 1 answered: SHARED HEAP, TYPED CALLS!
import { Smp } from "shardheap";
import type { WordCount } from "./tasks.js";

// Name the module ./tasks.js, as TypeScript's imports do: compiled, it is
// dist/tasks.js next to dist/main.js; under tsx, tsx finds tasks.ts for it.
const smp = await Smp.start({ shards: 2, memoryPerShard: "8MiB", mainShard: true, module: new URL("./tasks.js", import.meta.url) });
smp.on("error", (e) => console.error(`shard ${e.shard}:`, e.message));
const tasks = smp.tasks<typeof import("./tasks.js")>();

const text = "The heap is shared and the shards own it. The shards talk, and the heap is read in place.";
const words: number = await tasks.countLine(0, text);
console.log(`counted ${words} words on shard 0's request`);
// tasks.countLine(0, 42)    error TS2345: Argument of type 'number' is not assignable to parameter of type 'string'.
// tasks.countLines(0, text) error TS2551: Property 'countLines' does not exist on type ... Did you mean 'countLine'?

const perShard: WordCount[][] = await tasks.top.onAll(3); // every shard, results in shard order
const top = perShard.flat().sort((a, b) => b.count - a.count || a.word.localeCompare(b.word)).slice(0, 3);
console.log(`top words: ${top.map((w) => `${w.word} ${w.count}`).join(", ")}`);

const question = smp.memory.mallocString("shared heap, typed calls"); // the main thread's own shard (mainShard)
const answer: number = await tasks.shout(1, question);
console.log(`shard 1 answered: ${smp.heap.storedString(answer)}`);
smp.heap.free(answer);
smp.memory.free(question);
await smp.stop();
