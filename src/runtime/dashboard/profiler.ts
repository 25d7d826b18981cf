/**
 * The heap profiler's switch and rate per shard (PUT /v1/heapprof), shown
 * from the samples' rates, a switch just flipped held until a newer sample;
 * the rate box and "Now" say a rate the same way ("every allocation", or
 * the bytes per sample as sizes print). And the warning over the
 * flamegraph while the chosen shards' profilers fold allocations into
 * "(other sites)" (their site tables are full).
 */
import type { RateBody } from "./api.js";
import { $, apiJson, chosenShards, count, el, input, latestSample, messageOf, shardName, size, state, status } from "./lib.js";

// A rate reads the same in the box and in "Now": "every allocation", or the bytes per sample as size() prints them.
function rateBoxText(rate: number): string {
  return rate === 1 ? "every allocation" : size(rate);
}
function rateText(rate: number): string {
  return rate === 0 ? "off" : rate === 1 ? "every allocation" : rate < 0 ? "mixed" : "1 sample per " + rateBoxText(rate);
}
/** What the box says, as the API's rate parameter: "every allocation" (or "every", "exact") is 1. */
function rateFromBox(text: string): string {
  const t = text.trim();
  return /^(every( allocation)?|exact)$/i.test(t) ? "1" : t;
}

export function makeProfilerTable(): void {
  const body = $("profiler-rows");
  body.textContent = "";
  for (let s = 0; s < state.shards; s++) {
    const row = el("tr", { id: "prof-row-" + s });
    row.appendChild(el("td", null, shardName(s)));
    const on = el("input", { type: "checkbox", id: "prof-on-" + s, "aria-label": "profiler of " + shardName(s) });
    const onCell = el("td");
    onCell.appendChild(on);
    row.appendChild(onCell);
    const rate = el("input", { type: "text", id: "prof-rate-" + s, size: "14", value: "64K", list: "rate-choices", "aria-label": "sample rate of " + shardName(s) });
    const rateCell = el("td");
    rateCell.appendChild(rate);
    row.appendChild(rateCell);
    const apply = el("button", { id: "prof-apply-" + s }, "Apply");
    const applyCell = el("td");
    applyCell.appendChild(apply);
    row.appendChild(applyCell);
    row.appendChild(el("td", { id: "prof-now-" + s }, ""));
    body.appendChild(row);
    const shard = s;
    // Its own checkbox by id, as the row was made.
    on.addEventListener("change", () => void setRate(shard, input("prof-on-" + shard).checked ? rateFromBox(input("prof-rate-" + shard).value) : "0"));
    apply.addEventListener("click", () => void setRate(shard, rateFromBox(input("prof-rate-" + shard).value)));
  }
}
async function setRate(shard: number, rate: string): Promise<void> {
  // The switch holds as clicked until the server answers: a sample taken before the shard applied it would flip it back.
  state.rateSetAt[shard] = Infinity;
  try {
    const applied = (await apiJson<RateBody>("/v1/heapprof?shard=" + shard + "&rate=" + encodeURIComponent(rate.trim()), { method: "PUT" })).rate;
    state.rateSetAt[shard] = Date.now();
    showRate(shard, applied);
    status(shardName(shard) + ": profiler " + rateText(applied));
  } catch (e) {
    state.rateSetAt[shard] = 0;
    status(shardName(shard) + ": " + messageOf(e), true);
    const latest = latestSample();
    if (latest) showRate(shard, latest.shards[shard]!.sampleRate);
  }
}
function showRate(shard: number, rate: number): void {
  input("prof-on-" + shard).checked = rate !== 0;
  $("prof-now-" + shard).textContent = rateText(rate);
  // Off keeps the box as it is: the rate the switch turns on with.
  if (rate >= 1 && document.activeElement !== $("prof-rate-" + shard)) input("prof-rate-" + shard).value = rateBoxText(rate);
}
export function drawRates(): void {
  const latest = latestSample();
  if (!latest) return;
  for (let s = 0; s < state.shards; s++) {
    // A switch just flipped here stays as set until a sample taken after it arrives.
    if ((state.rateSetAt[s] || 0) > latest.t) continue;
    showRate(s, latest.shards[s]!.sampleRate);
  }
}

// ---- the folded-sites warning: a full site table hides stacks in "(other sites)" ----
export function drawFolded(): void {
  const latest = latestSample();
  if (!latest) return;
  const shards = state.shard === "all" ? latest.shards.map((_, i) => i) : chosenShards(state.shard);
  const folding = shards.filter((s) => latest.shards[s]!.foldedAllocations > 0);
  const warning = $("folded-warning");
  warning.hidden = folding.length === 0;
  if (!folding.length) return;
  const n = folding.reduce((sum, s) => sum + latest.shards[s]!.foldedAllocations, 0);
  const capacity = latest.shards[folding[0]!]!.siteCapacity;
  warning.textContent =
    count(n) +
    ' allocations went to "(other sites)" on ' +
    (folding.length > 1 ? "shards " : "shard ") +
    folding.join(", ") +
    ": the profiler's site table is full (" +
    capacity +
    (capacity === 1 ? " site" : " sites") +
    " a shard), so their stacks are not told apart. Start with --heapprof-sites N (heapprofSites) for more.";
}
