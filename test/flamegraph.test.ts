/**
 * The SVG flamegraph's structure (the interactive parts are checked in a
 * real browser by flamegraph-browser.test.ts).
 */
import { describe, expect, it } from "vitest";
import { toFlamegraphSvg } from "../src/report/flamegraph.js";
import { profileOf as profile, siteOf as site } from "./helpers.js";

describe("toFlamegraphSvg", () => {
  const svg = toFlamegraphSvg(profile([site(["leafA", "main"], 300), site(["leafB", "main"], 100), site(["gone"], 0)]), { title: "Shard <0> & co" });
  const frames = [...svg.matchAll(/<g class="frame" data-x="([\d.e-]+)" data-w="([\d.e-]+)" data-depth="(\d+)" data-name="([^"]*)" data-value="([\d.]+)">/g)];

  it("has one frame per call-tree node, widths proportional to live bytes", () => {
    const byName = Object.fromEntries(frames.map((m) => [m[4], { x: Number(m[1]), w: Number(m[2]), depth: Number(m[3]) }]));
    expect(Object.keys(byName).sort()).toEqual(["all", "leafA", "leafB", "main"]);
    expect(byName.all).toEqual({ x: 0, w: 1, depth: 0 });
    expect(byName.main!.w).toBeCloseTo(1);
    expect(byName.leafA!.w).toBeCloseTo(0.75);
    expect(byName.leafB!.w).toBeCloseTo(0.25);
    expect(byName.leafB!.x).toBeCloseTo(0.75);
    expect(byName.leafA!.depth).toBe(2);
  });

  it("is self-contained and escapes names and the title", () => {
    expect(svg).toMatch(/^<\?xml version="1.0"/);
    expect(svg).toContain("<title>leafA (300 bytes, 75.00%)</title>");
    expect(svg).toContain("Shard &lt;0&gt; &amp; co");
    expect(svg).not.toMatch(/https?:\/\/(?!www\.w3\.org)/); // nothing fetched from the network
    const evil = toFlamegraphSvg(profile([site(['<script>alert("x")</script>'], 10)]));
    expect(evil).not.toContain('<script>alert("x")');
    expect(evil).toContain("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;");
  });

  it("an empty profile still renders the root", () => {
    expect(toFlamegraphSvg(profile([]))).toMatch(/data-name="all" data-value="0"/);
  });
});
