/**
 * Plugs the heap image writer into the allocator's hooks (hooks.ts) as
 * this module loads, for SharedHeap.saveImage. Imported, for that effect
 * alone, by every module outside src/memory that makes a heap (hooks.ts
 * names them).
 */
import { plugHeapImage } from "../hooks.js";
import { saveHeapImage } from "./heap-image-writer.js";

plugHeapImage({ save: saveHeapImage });
