/**
 * Growing sites (GET /v1/heapprof/growing, by=bytes or count): the sites
 * whose live bytes (or objects) rose steadily over the growth window
 * (least-squares), each opening to its frames and a button that searches
 * the flamegraphs for it.
 */
import type { GrowingBody } from "./api.js";
import { findInFlamegraphs } from "./flamegraphs.js";
import { $, apiJson, count, el, frameName, messageOf, select, signedSize, size, status, withShard } from "./lib.js";
import { distinguishingDepths, siteStack } from "./sites.js";

export async function refreshGrowing(): Promise<void> {
  try {
    const byCount = select("growing-by").value === "count";
    const body = await apiJson<GrowingBody>(withShard("/v1/heapprof/growing?by=" + (byCount ? "count" : "bytes")));
    $("growing-window").textContent = body.windowSeconds + " s";
    $("growing-what").textContent = byCount ? "objects" : "bytes";
    const list = $("growing-list");
    list.textContent = "";
    if (body.sites.length === 0) list.appendChild(el("li", { class: "none" }, "nothing grows steadily"));
    const depths = distinguishingDepths(body.sites);
    body.sites.forEach((g, i) => {
      const item = el("li", { class: "growing-site" });
      const details = siteStack(g, depths[i]!);
      const figures = byCount
        ? " +" + count(g.countSlope) + " objects/s, fit " + g.countR2.toFixed(2) + ", " + count(g.liveCount) + " live (" + size(g.liveBytes) + "), +" + count(g.countGrowth) + " in the window"
        : " " + signedSize(g.slope) + "/s, fit " + g.r2.toFixed(2) + ", " + size(g.liveBytes) + " live, " + signedSize(g.growth) + " in the window";
      details.querySelector("summary")!.appendChild(el("span", { class: "num" }, figures));
      const find = el("button", null, "Find in flamegraphs");
      find.addEventListener("click", () => findInFlamegraphs(frameName(g.frames[0] || { functionName: "", url: "", line: 0, column: 0 })));
      details.appendChild(find);
      item.appendChild(details);
      list.appendChild(item);
    });
  } catch (e) {
    status("growing sites: " + messageOf(e), true);
  }
}
