/**
 * Memory by label (GET /v1/heapprof/labels): the label names the profile
 * carries (the first chosen until another is), the chosen label's values
 * with live bytes, objects and share, largest first, NO_LABEL for the
 * sites without it; a value's click shows the flamegraph of its sites only
 * (label=NAME=VALUE, by=NAME so its root names the value), until "Show all".
 */
import type { LabelsBody } from "./api.js";
import { refreshFlame } from "./flamegraphs.js";
import { $, apiJson, count, el, element, exact, messageOf, select, size, state, status, withShard } from "./lib.js";
import { NO_LABEL, shown } from "./text.js";

function drawLabelChoice(names: string[]): void {
  if (state.labelName === null || names.indexOf(state.labelName) < 0) state.labelName = names.length ? names[0]! : null;
  const chooser = select("label-name");
  if (Array.from(chooser.options).map((o) => o.value).join("\n") !== names.join("\n")) {
    chooser.textContent = "";
    names.forEach((n) => chooser.appendChild(el("option", { value: n }, shown(n))));
  }
  if (state.labelName !== null) chooser.value = state.labelName;
  chooser.disabled = names.length === 0;
  $("no-labels").hidden = names.length > 0;
  $("label-table").hidden = names.length === 0;
}
function drawLabelFilter(): void {
  const f = state.labelFilter;
  $("label-filter").hidden = !f;
  $("label-filter-name").textContent = f ? shown(f.name + "=" + f.value) : "";
  const rows = element("label-rows", HTMLTableSectionElement);
  Array.from(rows.rows).forEach((row) => {
    row.classList.toggle("chosen", !!f && f.name === state.labelName && f.value === row.getAttribute("data-value"));
  });
}
/** Shows the flamegraph of label `name`'s `value` only, or (value null) of every site again. */
export function showLabelValue(name: string | null, value: string | null): void {
  state.labelFilter = value === null || name === null ? null : { name: name, value: value };
  drawLabelFilter();
  void refreshFlame();
  if (value !== null) $("flame-section").scrollIntoView();
}
function drawLabelTable(body: LabelsBody & { by: string }): void {
  const rows = $("label-rows");
  rows.textContent = "";
  (body.groups ?? []).forEach((g) => {
    const value = g.value === undefined ? NO_LABEL : g.value;
    const row = el("tr", { "data-value": value });
    const cell = el("td", { class: "name" });
    const pick = el("button", { class: "value", title: "the flamegraph of " + shown(body.by + "=" + value) + " only" }, shown(value));
    pick.addEventListener("click", () => showLabelValue(body.by, value));
    cell.appendChild(pick);
    row.appendChild(cell);
    row.appendChild(el("td", { class: "num bytes", "data-bytes": String(g.size), title: exact(g.size) + " bytes" }, size(g.size)));
    row.appendChild(el("td", { class: "num objects", "data-count": String(g.count), title: exact(g.count) + " objects in " + exact(g.sites) + (g.sites === 1 ? " site" : " sites") }, count(g.count)));
    row.appendChild(el("td", { class: "num share" }, body.totalSize > 0 ? ((100 * g.size) / body.totalSize).toFixed(1) + "%" : "-"));
    rows.appendChild(row);
  });
  drawLabelFilter();
}
export async function refreshLabels(): Promise<void> {
  try {
    // A second ask when the names say the chosen label is not the one asked for (the first view, or it went away).
    for (let attempt = 0; attempt < 2; attempt++) {
      const asked = state.labelName;
      const body = await apiJson<LabelsBody>(withShard("/v1/heapprof/labels" + (asked === null ? "" : "?by=" + encodeURIComponent(asked))));
      drawLabelChoice(body.names);
      if (state.labelName === null) {
        $("label-rows").textContent = "";
        return;
      }
      if (body.by === state.labelName) {
        drawLabelTable({ ...body, by: body.by });
        return;
      }
    }
  } catch (e) {
    status("labels: " + messageOf(e), true);
  }
}
