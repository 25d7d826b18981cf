/**
 * Named baselines (POST, DELETE /v1/heapprof/baseline?name=), one chosen
 * to compare with (the newest until the user chooses), and the growth
 * since as a differential flamegraph with a table of the sites that grew
 * most, by bytes or by objects.
 */
import type { BaselineInfo, BaselineSetBody, ProfileBody } from "./api.js";
import { loadSvg } from "./flamegraphs.js";
import { $, api, apiJson, chosenShards, count, el, element, input, messageOf, select, shardName, signedSize, size, state, status, withShard } from "./lib.js";
import { distinguishingDepths, siteStack } from "./sites.js";

function baselineNames(): string[] {
  const names: string[] = [];
  state.baselines.forEach((b) => {
    if (names.indexOf(b.name) < 0) names.push(b.name);
  });
  return names;
}
/** The baselines of the chosen name for the selected shard(s), or null when a shard has none. */
function baselineFor(shard: string): BaselineInfo[] | null {
  const found = chosenShards(shard).map((s) => state.baselines.find((b) => b.shard === s && b.name === state.baselineName));
  return found.every((b): b is BaselineInfo => b !== undefined) ? found : null;
}
export function baselineQuery(): string {
  return "&baseline=" + encodeURIComponent(state.baselineName);
}
/** The name of the baseline taken last (of any shard). */
function newestBaselineName(): string {
  let newest: BaselineInfo | null = null;
  for (const b of state.baselines) if (newest === null || b.takenAt >= newest.takenAt) newest = b;
  return newest === null ? state.baselineName : newest.name;
}
/**
 * The chooser lists the server's names. The growth is shown since the
 * newest baseline until the user chooses (the oldest would compare a
 * baseline taken just now with one from long before); a chosen name that
 * went away gives way to the newest left.
 */
export function drawBaselineChoice(): void {
  const names = baselineNames();
  if (names.length && names.indexOf(state.baselineName) < 0) state.baselineChosen = false;
  if (names.length && !state.baselineChosen) state.baselineName = newestBaselineName();
  const chooser = select("baseline-select");
  const wanted = names.length ? names : [state.baselineName];
  if (Array.from(chooser.options).map((o) => o.value).join("\n") !== wanted.join("\n")) {
    chooser.textContent = "";
    wanted.forEach((n) => chooser.appendChild(el("option", { value: n }, n)));
  }
  chooser.value = state.baselineName;
  element("delete-baseline", HTMLButtonElement).disabled = names.length === 0;
}
/*
 * Baseline changes and growth reads take turns: a growth read in flight
 * when its baseline is deleted would ask for a name the server no longer
 * has (a 409, which the browser logs however the page handles it). And a
 * history answer that was in flight across a change lists the baselines
 * of before it, so poll() drops it (baselineEpoch moves on both sides of
 * every change).
 */
let growthTurn: Promise<unknown> = Promise.resolve();
let epoch = 0;
/** Moves on both sides of every baseline change: a history answer asked for at another epoch lists baselines of before. */
export function baselineEpoch(): number {
  return epoch;
}
function inGrowthTurn<T>(fn: () => Promise<T>): Promise<T> {
  const turn = growthTurn.then(fn, fn);
  growthTurn = turn.catch(() => {
    /* reported by fn itself */
  });
  return turn;
}
async function changeBaselines<T>(fn: () => Promise<T>): Promise<T> {
  epoch++;
  try {
    return await fn();
  } finally {
    epoch++;
  }
}
export function setBaseline(): Promise<void> {
  const name = input("baseline-name").value.trim() || state.baselineName;
  return inGrowthTurn(async () => {
    try {
      const set = (
        await changeBaselines(() => apiJson<BaselineSetBody>("/v1/heapprof/baseline?shard=" + state.shard + "&name=" + encodeURIComponent(name), { method: "POST" }))
      ).baselines;
      state.baselines = state.baselines.filter((o) => !set.some((b) => b.name === o.name && b.shard === o.shard)).concat(set);
      state.baselineName = name;
      state.baselineChosen = true;
      input("baseline-name").value = "";
      drawBaselineChoice();
      status("baseline " + name + " set for " + (state.shard === "all" ? "all shards" : shardName(state.shard)));
      await refreshGrowthNow();
    } catch (e) {
      status("baseline: " + messageOf(e), true);
    }
  });
}
export function deleteBaseline(): Promise<void> {
  const name = state.baselineName;
  return inGrowthTurn(async () => {
    try {
      await changeBaselines(() => api("/v1/heapprof/baseline?name=" + encodeURIComponent(name), { method: "DELETE" }));
      state.baselines = state.baselines.filter((b) => b.name !== name);
      drawBaselineChoice();
      status("baseline " + name + " deleted");
      await refreshGrowthNow();
    } catch (e) {
      status("baseline: " + messageOf(e), true);
    }
  });
}
export function refreshGrowth(): Promise<void> {
  return inGrowthTurn(refreshGrowthNow);
}
async function refreshGrowthNow(): Promise<void> {
  const base = baselineFor(state.shard);
  $("growth").hidden = !base;
  $("no-baseline").hidden = !!base;
  if (!base) {
    $("baseline-info").textContent = "";
    return;
  }
  const oldest = Math.min(...base.map((b) => b.takenAt));
  $("baseline-info").textContent = "since " + new Date(oldest).toLocaleTimeString() + " (" + size(base.reduce((n, b) => n + b.totalSize, 0)) + " live then)";
  try {
    await loadSvg("growth-flame", withShard("/v1/heapprof?format=svg&diff=baseline" + baselineQuery()));
    const diff = await apiJson<ProfileBody>(withShard("/v1/heapprof?format=json&diff=baseline" + baselineQuery()));
    const body = $("grown-rows");
    body.textContent = "";
    // By bytes (the diff's own order) or by objects: many small objects gain few bytes.
    const byCount = select("grown-by").value === "count";
    const grown = diff.sites.filter((s) => (byCount ? s.count > 0 : s.size > 0));
    if (byCount) grown.sort((a, b) => b.count - a.count || b.size - a.size);
    grown.splice(10);
    const depths = distinguishingDepths(grown);
    grown.forEach((s, i) => {
      const row = el("tr", { class: "grown" });
      const cell = el("td", { class: "name" });
      cell.appendChild(siteStack(s, depths[i]!));
      row.appendChild(cell);
      row.appendChild(el("td", { class: "num" }, signedSize(s.size)));
      row.appendChild(el("td", { class: "num" }, (s.count > 0 ? "+" : "") + count(s.count)));
      body.appendChild(row);
    });
    $("growth-total").textContent = signedSize(diff.totalSize) + " in all";
  } catch (e) {
    status("growth: " + messageOf(e), true);
  }
}
