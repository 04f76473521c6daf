import { describe, expect, test } from "bun:test";
import Ajv2020 from "ajv/dist/2020";
import { spawnCore } from "../fixtures/core-process.ts";
import { SCHEMA, strictAjv, validator } from "../fixtures/protocol-schema.ts";
import { writeStack } from "../fixtures/stack.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// docs/protocol.schema.json as a host in another language meets it: ajv in strict mode (no
// unknown keywords, no union types, strict tuples and required), then every line the compiled
// core writes in a session that touches each method, validated against the envelope and the
// method's own result or event schema, and every request sent against its request schema.
type Json = Record<string, any>;

describe("docs/protocol.schema.json", () => {
  test("compiles under ajv's strict mode", () => {
    const ajv = new Ajv2020({ strict: true });
    expect(() => ajv.compile(SCHEMA)).not.toThrow();
  });

  test("every line the compiled core writes validates, and so does every request", async () => {
    await using dir = tmpdir();
    writeStack(dir.path, { script: [{ content: "Hello from the stand-in." }] });
    await using core = spawnCore({ args: ["--config", "config.yaml"], cwd: dir.path });
    const ajv = strictAjv();
    const index = SCHEMA.$defs.ProtocolIndex.const as {
      methods: Record<string, { request: Json; result?: Json }>;
      events: Record<string, Json>;
    };
    const requests: { id: number | string; method: string; params?: Json; bad?: boolean }[] = [
      { id: 1, method: "initialize", params: { protocol_versions: [1], client: { name: "schema-test" } } },
      { id: 2, method: "ping" },
      { id: 3, method: "doctor" },
      { id: 4, method: "plan" },
      { id: "w", method: "warmup", params: {} },
      { id: 5, method: "chat", params: { input: "Hi", session_id: "s1" } },
      { id: 6, method: "cancel", params: { request_id: "nothing-running" } },
      { id: 7, method: "no.such.method" },
      // The schema refuses it as the core does.
      { id: 8, method: "chat", params: { session_id: "bad id" }, bad: true },
    ];
    const methodOf = new Map<unknown, string>();
    for (const r of requests) {
      // Requests for unknown methods are the host's mistake, not a protocol message.
      const { bad, ...request } = r;
      const schema = index.methods[r.method]?.request.$ref;
      if (schema) expect(validator(ajv, schema)(request) === "valid").toBe(!bad);
      methodOf.set(r.id, r.method);
      await core.request(request, 20_000);
    }
    core.write("{not json\n");
    await core.waitFor((m) => m.some((x) => x.id === null), 5_000);
    methodOf.set(9, "shutdown");
    await core.request({ id: 9, method: "shutdown" });
    expect(await core.exited()).toBe(0);

    const envelope = validator(ajv, "");
    const seen = new Set<string>();
    for (const [i, line] of core.rawLines.entries()) {
      const msg = JSON.parse(line) as Json;
      const where = `line ${i} ${line.slice(0, 120)}`;
      expect(`${where}: ${envelope(msg)}`).toBe(`${where}: valid`);
      let specific: string | undefined;
      if (msg.type === "event") specific = index.events[msg.event]?.$ref;
      else if (msg.type === "result") specific = index.methods[methodOf.get(msg.id) ?? ""]?.result?.$ref;
      else specific = "#/$defs/ErrorMessage";
      expect(`${where}: ${specific ? "has a schema" : "no schema"}`).toBe(`${where}: has a schema`);
      // Results are checked inside their envelope's `result`; events and errors whole.
      const value = msg.type === "result" ? msg.result : msg;
      expect(`${where}: ${validator(ajv, specific!)(value)}`).toBe(`${where}: valid`);
      seen.add(
        msg.type === "event" ? `event ${msg.event}` : `${msg.type} ${methodOf.get(msg.id) ?? msg.code}`,
      );
    }
    // The session really touched what it claims to: each kind of line came up.
    for (const kind of [
      "result initialize",
      "result ping",
      "result doctor",
      "result plan",
      "result warmup",
      "result chat",
      "result cancel",
      "result shutdown",
      "event warmup_progress",
      "event run_start",
      "event llm_chunk",
      "event final",
      "error no.such.method",
      "error chat",
      "error invalid_json",
    ])
      expect(seen).toContain(kind);
  }, 60_000);
});
