import { expect, test } from "bun:test";
import type { DoctorReport } from "../../src/doctor/doctor.ts";
import { renderDoctorJson } from "../../src/doctor/render.ts";

// A message quoting a file's text: DEL, C1 CSI (U+009B, read as ESC [ by some terminals and log
// viewers) and a bidi override. JSON.stringify escapes C0 only, so `doctor --json` wrote these raw.
const quoted = "arch \u009b2J\u007f\u0085\u202eevil";
const report = {
  ok: false,
  checks: [{ id: "model", status: "fail", message: quoted, fix: "see \u009b]8;;x" }],
} as unknown as DoctorReport;

test("doctor --json escapes DEL, C1 and bidi controls and keeps the text", () => {
  const out = renderDoctorJson(report);
  expect(out).not.toMatch(/[\u007f-\u009f\u202e]/);
  expect(out).toContain("\\u009b2J\\u007f\\u0085\\u202eevil");
  expect(JSON.parse(out)).toEqual(report);
  expect(out.endsWith("}\n")).toBe(true);
});
