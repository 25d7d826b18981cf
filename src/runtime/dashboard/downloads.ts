/**
 * Downloads of the selected shard's (or all shards') profile in every
 * format, the growth since the chosen baseline, and the heap image when the
 * server allows it: fetched with the token as a header, handed to the
 * browser as a blob.
 */
import { baselineQuery } from "./baselines.js";
import { $, api, el, messageOf, state, status, withShard } from "./lib.js";

/** [button, file name, path]. */
const DOWNLOADS: ReadonlyArray<readonly [string, string, string]> = [
  ["pprof", "heapprof.pb.gz", "/v1/heapprof?format=pprof"],
  ["heapprofile", "heapprof.heapprofile", "/v1/heapprof?format=heapprofile"],
  ["collapsed", "heapprof.collapsed", "/v1/heapprof?format=collapsed"],
  ["SVG", "heapprof.svg", "/v1/heapprof?format=svg"],
  ["tree", "heapprof.txt", "/v1/heapprof?format=tree"],
  ["growth pprof", "growth.pb.gz", "/v1/heapprof?format=pprof&diff=baseline"],
  ["growth SVG", "growth.svg", "/v1/heapprof?format=svg&diff=baseline"],
  ["heap image", "heap.img", "/v1/heap/image"],
];
export function makeDownloads(): void {
  const box = $("downloads");
  box.textContent = "";
  DOWNLOADS.forEach(([label, file, path]) => {
    if (path === "/v1/heap/image" && !state.heapImage) return;
    const b = el("button", { "data-file": file }, label);
    b.addEventListener("click", () => {
      const full = path.indexOf("diff=baseline") < 0 ? path : path + baselineQuery();
      void download(file, full === "/v1/heap/image" ? full : withShard(full));
    });
    box.appendChild(b);
  });
}
/** Saves what `path` answers as `name` (prefixed with the shard when one is chosen). */
export async function download(name: string, path: string): Promise<void> {
  try {
    const blob = await (await api(path)).blob();
    const a = el("a", { download: (state.shard === "all" ? "" : "shard" + state.shard + "-") + name });
    a.href = URL.createObjectURL(blob);
    document.body.appendChild(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(a.href), 10000);
  } catch (e) {
    status(name + ": " + messageOf(e), true);
  }
}
