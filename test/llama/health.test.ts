import { describe, expect, test } from "bun:test";
import { healthStatus, modelsStatus } from "../../src/llama/health.ts";
import { RECORDINGS } from "../contract/recordings.ts";
import { readExchanges, readTranscript } from "../contract/transcript.ts";
import { TAPE_KEY, tape } from "./tape.ts";

describe("readiness and the key check", () => {
  test("02-health-ready.txt: /health's status, asked without the key", async () => {
    using t = tape(readTranscript(RECORDINGS, "02-health-ready.txt"));
    expect(await healthStatus(t.baseUrl, 1000)).toBe(200);
    expect(t.asked[0]).toMatchObject({ path: "/health", authorization: null });
  });

  test("76-api-key.txt: /v1/models is 401 without the key and 200 with it", async () => {
    const [anonymous, , keyed] = readExchanges(RECORDINGS, "76-api-key.txt");
    using t = tape(anonymous!, keyed!);
    expect(await modelsStatus({ baseUrl: t.baseUrl }, 1000)).toBe(401);
    expect(await modelsStatus(t, 1000)).toBe(200);
    expect(t.asked.map((a) => a.authorization)).toEqual([null, `Bearer ${TAPE_KEY}`]);
  });

  test("nothing listening (the port not open yet, 01): null", async () => {
    const t = tape();
    t[Symbol.dispose]();
    expect(await healthStatus(t.baseUrl, 1000)).toBeNull();
  });
});
