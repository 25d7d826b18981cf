/**
 * The app panel: the figures the program publishes (smp.publishAppStats,
 * the history's `apps`), counters with their rate per second; hidden when
 * no app publishes.
 */
import type { AppFigure, AppStats } from "./api.js";
import { $, el, exact, size, state } from "./lib.js";

function figureText(f: AppFigure): string {
  return f.unit === "ratio" ? (f.value * 100).toFixed(1) + "%" : f.unit === "bytes" ? size(f.value) : exact(f.value);
}
/** One panel per app that publishes; counters also show their rate since the previous poll. */
export function drawApps(apps: AppStats[]): void {
  $("app-section").hidden = apps.length === 0;
  const box = $("app-panels");
  box.textContent = "";
  const before = state.appsBefore;
  state.appsBefore = {};
  apps.forEach((a) => {
    const panel = el("div", { class: "app-panel", "data-app": a.app });
    panel.appendChild(el("h3", null, a.app));
    if (a.error) panel.appendChild(el("p", { class: "error" }, a.error));
    const table = el("table");
    a.figures.forEach((f) => {
      const row = el("tr", { "data-figure": f.name });
      row.appendChild(el("th", f.help ? { title: f.help } : null, f.name));
      row.appendChild(el("td", { class: "num value" }, figureText(f)));
      let rate = "";
      const prev = before[a.app + "\n" + f.name];
      if (f.kind === "counter" && prev && a.t > prev.t) {
        const perSecond = ((f.value - prev.value) * 1000) / (a.t - prev.t);
        rate = (perSecond >= 0 ? "+" : "") + (f.unit === "bytes" ? size(perSecond) : exact(Math.round(perSecond * 10) / 10)) + "/s";
      }
      row.appendChild(el("td", { class: "num rate" }, rate));
      table.appendChild(row);
      state.appsBefore[a.app + "\n" + f.name] = { value: f.value, t: a.t };
    });
    panel.appendChild(table);
    box.appendChild(panel);
  });
}
