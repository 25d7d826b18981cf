/**
 * Flamegraphs: our SVG renderer's (format=svg), each in an iframe from a
 * blob: URL (fetched with the token, shown from memory), as tall as the
 * graph, searched through the SVG's own search(); and the live one, of the
 * chosen shard or all, or of one label value's sites only.
 */
import { $, api, frame, input, messageOf, state, status, withShard } from "./lib.js";

/** The flamegraph's own script (report/flamegraph.ts) leaves search(term) in its window. */
type FlamegraphWindow = Window & { search?: (term: string) => void };

export async function loadSvg(frameId: string, path: string): Promise<void> {
  const f = frame(frameId);
  const r = await api(path);
  const blob = new Blob([await r.text()], { type: "image/svg+xml" });
  const url = URL.createObjectURL(blob);
  const old = f.getAttribute("data-url");
  f.onload = () => {
    if (old) URL.revokeObjectURL(old);
    // As tall as the graph: the SVG says its height.
    const svg = f.contentDocument && f.contentDocument.documentElement;
    const height = svg ? Number(svg.getAttribute("height")) : 0;
    if (height > 0) f.style.height = height + 24 + "px";
    applySearch(f);
    f.setAttribute("data-loaded", String(Date.now()));
  };
  f.setAttribute("data-url", url);
  f.src = url;
}
function applySearch(f: HTMLIFrameElement): void {
  const term = input("search").value;
  const w = f.contentWindow as FlamegraphWindow | null;
  if (!w || typeof w.search !== "function") return;
  try {
    new RegExp(term);
  } catch (e) {
    status("search: " + messageOf(e), true);
    return;
  }
  w.search(term);
}
export function searchAll(): void {
  Array.from(document.querySelectorAll("iframe")).forEach(applySearch);
}
/** Searches every flamegraph for a frame named `name` and brings the live one into view. */
export function findInFlamegraphs(name: string): void {
  input("search").value = "^" + name.replace(/[.*+?^$(){}|[\]\\]/g, "\\$&");
  searchAll();
  $("flame-section").scrollIntoView();
}

/** The live flamegraph's query: all sites, or one label value's (its root frame then names the value). */
function flamePath(): string {
  const f = state.labelFilter;
  const only = f ? "&by=" + encodeURIComponent(f.name) + "&label=" + encodeURIComponent(f.name + "=" + f.value) : "";
  return withShard("/v1/heapprof?format=svg" + only);
}
export async function refreshFlame(): Promise<void> {
  try {
    await loadSvg("flame", flamePath());
  } catch (e) {
    status("flamegraph: " + messageOf(e), true);
  }
}
