import { expect, spyOn, test } from "bun:test";
import { crowdedLine, HOST_LOOK_FROM_CHARS, MAX_HOST_VALUES } from "../../src/protocol/crowded-line.ts";
import { startHarness } from "../fixtures/stdio-harness.ts";

// A line of 900,000 keys (7.7 MiB, under the default stdio.max_line_bytes) held the main loop
// 1.4-1.8 s in JSON.parse alone on a 2-core machine: a ping sent after it waited that out.
test("a host's line of too many values is refused unparsed; the ping after it is answered", async () => {
  const h = startHarness();
  const parsed: number[] = [];
  const parse = JSON.parse;
  const spy = spyOn(JSON, "parse").mockImplementation(((text: string, ...rest: []) => {
    if (typeof text === "string") parsed.push(text.length);
    return parse(text, ...rest);
  }) as typeof JSON.parse);
  try {
    const keys = Array.from({ length: MAX_HOST_VALUES + 1000 }, (_, i) => `"k${i}":0`).join(",");
    const line = `{"id":5,"method":"ping","params":{${keys}}}`;
    expect(line.length).toBeGreaterThan(HOST_LOOK_FROM_CHARS);
    h.sendRaw(`${line}\n`);
    expect(await h.request({ id: 6, method: "ping" })).toMatchObject({ result: { status: "ok" } });
    expect(h.messages.find((m) => m.id === 5)).toMatchObject({ type: "error", code: "invalid_request" });
    expect(String(h.messages.find((m) => m.id === 5)?.message)).toContain(
      `at most ${MAX_HOST_VALUES} are read`,
    );
    expect(parsed).not.toContain(line.length);
  } finally {
    spy.mockRestore();
    h.end();
    await h.exit;
  }
});

test("a long line of few values (an image's base64) is read as it is", async () => {
  const h = startHarness();
  try {
    const reply = await h.request({ id: 7, method: "ping", params: { note: "x".repeat(200_000) } });
    expect(reply).toMatchObject({ result: { status: "ok" } });
  } finally {
    h.end();
    await h.exit;
  }
});

// A line that is no JSON object, a host's stray CSV or log text, is answered `invalid_json` as any
// line that does not parse: counted, one of many commas was answered `invalid_request` "holds about
// N JSON values". Only an object or array can hold values worth counting; anything else fails or
// ends at its first token.
test("a long line that is not a JSON object or array is left to its parse", () => {
  const csv = "a,".repeat(MAX_HOST_VALUES + 10);
  expect(crowdedLine(csv)).toBeUndefined();
  expect(crowdedLine(` \n\t${csv}`)).toBeUndefined();
  expect(crowdedLine(`"${csv}"`)).toBeUndefined();
  expect(crowdedLine(`{${csv}}`)).toBeDefined();
  expect(crowdedLine(` [${csv}]`)).toBeDefined();
});
