/**
 * A profile from a file given on the command line (`shardheap diff`): a
 * heap image (SharedHeap.saveImage, `stress`'s heap.img) or a pprof profile
 * shardheap wrote, told apart by the image's magic. The file is read as
 * readHeapImage reads one: a regular file only (opened non-blocking, so a
 * FIFO cannot hang the command), at most MAX_IMAGE_FILE_BYTES. Anything
 * else is a HeapFormatError naming the file.
 *
 * Two files to compare (readProfilesToDiff) are brought to one precision:
 * a pprof file holds integers (toPprof rounds), a heap image a sampled
 * profile's fractional estimates, so an image diffed against a pprof file
 * is first rounded as its export would be. Unrounded, an image against its
 * own export listed every site as changed by "+0B 0" (residues of 0.2 B,
 * 0.4 objects).
 *
 * They are also brought to one way of naming files: a pprof file holds
 * paths shown short (display-paths.ts) relative to the directory it was
 * written in, which it names; the other side's recorded frames are shown
 * relative to that same directory before sites are matched, so a diff run
 * from anywhere matches them (shown relative to the diff's own directory,
 * an image's frames and a pprof file's written elsewhere would all differ).
 */
import { constants } from "node:fs";
import { open } from "node:fs/promises";
import { HeapFormatError, InvalidValueError } from "../errors.js";
import { IMAGE_MAGIC } from "../memory/heap-image/heap-image-writer.js";
import { MAX_IMAGE_FILE_BYTES, decodeHeapImage } from "../memory/heap-image/heap-image.js";
import type { HeapProfile } from "../memory/heap-profile.js";
import { atPprofPrecision } from "./pprof.js";
import { withDisplayPaths } from "./display-paths.js";
import { readPprof } from "./pprof-read.js";
import { SourceMapCache, mapProfileToSources } from "./source-map.js";

export interface ProfileFile {
  kind: "heap image" | "pprof";
  profile: HeapProfile;
  /** The image's shard count (a pprof file does not say). */
  shards: number | undefined;
  /** A pprof file's directory its short paths are relative to (pprof-read.ts); undefined for paths as recorded. */
  pathBase: string | undefined;
}

async function readRegularFile(path: string): Promise<Buffer> {
  const handle = await open(path, constants.O_RDONLY | (constants.O_NONBLOCK ?? 0));
  try {
    const st = await handle.stat();
    if (!st.isFile()) throw new HeapFormatError(`${path} is not a heap image or a pprof profile: not a regular file`);
    if (st.size > MAX_IMAGE_FILE_BYTES) throw new HeapFormatError(`${path} is not a heap image or a pprof profile: ${st.size} bytes is more than either can be`);
    return await handle.readFile();
  } finally {
    await handle.close();
  }
}

/**
 * The profile in `path`: of `shard` (a heap image's shard; InvalidValueError
 * naming `shardFlag` when the image has no such shard or the file is a pprof
 * profile, which holds all shards merged), or of all shards.
 */
export async function readProfileFile(path: string, shard?: number, shardFlag = "--shard"): Promise<ProfileFile> {
  const bytes = await readRegularFile(path);
  if (bytes.subarray(0, IMAGE_MAGIC.length).toString("latin1") === IMAGE_MAGIC) {
    const heap = decodeHeapImage(bytes, path);
    if (shard !== undefined && shard >= heap.shards) {
      throw new InvalidValueError(shardFlag, `${shardFlag} ${shard}: ${path} has shards 0 to ${heap.shards - 1}`);
    }
    return { kind: "heap image", profile: heap.heapProfile(shard), shards: heap.shards, pathBase: undefined };
  }
  const { profile, pathBase } = readPprof(bytes, `${path} (not a heap image: no ${IMAGE_MAGIC} magic)`);
  if (shard !== undefined) throw new InvalidValueError(shardFlag, `${shardFlag} applies to heap images: ${path} is a pprof profile of all shards`);
  return { kind: "pprof", profile, shards: undefined, pathBase };
}

/**
 * `shardheap diff BASE NEXT`'s two profiles, ready for diffProfiles: each
 * mapped to its sources before matching (a pprof file holds mapped frames,
 * an image raw ones; mapping a mapped frame changes nothing), frames as
 * recorded shown as a pprof file with short paths shows its own, and a heap
 * image compared with a pprof file at pprof's precision.
 */
export async function readProfilesToDiff(basePath: string, nextPath: string, shard?: number): Promise<[HeapProfile, HeapProfile]> {
  const maps = new SourceMapCache();
  const files = [await readProfileFile(basePath, shard), await readProfileFile(nextPath, shard)];
  const mixed = files[0]!.kind !== files[1]!.kind;
  const pathBase = files.find((f) => f.pathBase !== undefined)?.pathBase;
  const profiles: HeapProfile[] = [];
  for (const f of files) {
    let mapped = await mapProfileToSources(f.profile, maps);
    if (pathBase !== undefined && f.pathBase === undefined) mapped = withDisplayPaths(mapped, pathBase);
    profiles.push(mixed && f.kind === "heap image" ? atPprofPrecision(mapped) : mapped);
  }
  return [profiles[0]!, profiles[1]!];
}
