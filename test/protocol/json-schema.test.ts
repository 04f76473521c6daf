import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { loadDefinitions, METHODS } from "../../src/methods/index.ts";
import { ChatEventFields } from "../../src/protocol/chat.ts";
import { buildProtocolJsonSchema, protocolJsonSchemaText } from "../../src/protocol/json-schema.ts";
import { ErrorCodeSchema } from "../../src/protocol/messages.ts";

const FILE = join(import.meta.dir, "../../docs/protocol.schema.json");
type Json = Record<string, any>;

function refs(node: unknown, out: string[] = []): string[] {
  if (Array.isArray(node)) for (const n of node) refs(n, out);
  else if (node && typeof node === "object") {
    for (const [k, v] of Object.entries(node)) {
      if (k === "$ref" && typeof v === "string") out.push(v);
      else refs(v, out);
    }
  }
  return out;
}

const definitions = await loadDefinitions();
const schema = buildProtocolJsonSchema(definitions) as Json;

describe("protocol JSON Schema", () => {
  test("docs/protocol.schema.json is current (run `bun run schema`)", async () => {
    expect(readFileSync(FILE, "utf8")).toBe(protocolJsonSchemaText(definitions));
  });

  test("every $ref resolves to a definition", () => {
    const all = refs(schema);
    expect(all.length).toBeGreaterThan(20);
    for (const ref of all) {
      expect(ref.startsWith("#/$defs/")).toBe(true);
      expect(schema.$defs[ref.slice("#/$defs/".length)]).toBeDefined();
    }
  });

  test("covers every served method's request and params, and chat's result and events", () => {
    const index = schema.$defs.ProtocolIndex.const;
    for (const { name } of METHODS) {
      expect(index.methods[name]?.request).toBeDefined();
      expect(index.methods[name]?.params).toBeDefined();
    }
    for (const name of [
      "initialize",
      "ping",
      "doctor",
      "plan",
      "chat",
      "cancel",
      "shutdown",
      "warmup",
      "status",
    ]) {
      expect(index.methods[name]?.result).toBeDefined();
    }
    // A chat's events include warmup's warmup_progress (issue 11); a pull's download_progress; documents.add's index_progress.
    expect(Object.keys(index.events)).toEqual([
      ...Object.keys(ChatEventFields),
      "download_progress",
      "index_progress",
    ]);
    expect(Object.keys(ChatEventFields).at(-1)).toBe("warmup_progress");
    expect(index.methods.chat.events).toHaveLength(Object.keys(ChatEventFields).length);
    expect(index.methods.warmup.events).toEqual([{ $ref: "#/$defs/WarmupProgressEvent" }]);
  });

  test("keeps the zod constraints a host must honour", () => {
    const defs = schema.$defs;
    expect(defs.ErrorCode.enum).toEqual(ErrorCodeSchema.options);
    expect(defs.RequestId.anyOf).toEqual([{ type: "string" }, { type: "number" }]);
    // Params are input-shaped: fields with defaults are optional, validation rules kept.
    expect(defs.ChatParams.required ?? []).toEqual([]);
    expect(defs.ChatParams.properties.user_id.pattern).toBe("^[A-Za-z0-9@+._-]+$");
    expect(defs.ChatParams.properties.user_id.maxLength).toBe(128);
    expect(defs.ChatRequest.properties.method.const).toBe("chat");
    expect(defs.ChatRequest.required).toEqual(["id", "method"]);
    // Results and events are output-shaped: what is on the wire.
    expect(defs.ChatResult.required).toEqual([
      "response",
      "session_id",
      "trace_id",
      "warnings",
      "reasoning",
      "usage",
      "dropped_events",
    ]);
    expect(defs.LlmChunkEvent.required).toEqual(["id", "type", "event", "step", "delta"]);
    expect(defs.LlmChunkEvent.properties.event.const).toBe("llm_chunk");
    expect(defs.ErrorMessage.required).toEqual(["id", "type", "code", "message"]);
    expect(defs.CancelParams.properties.request_id.$ref).toBe("#/$defs/RequestId");
  });
});
