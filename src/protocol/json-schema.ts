import { z } from "zod";
import { buildRegistry } from "../methods/index.ts";
import { ChatEventFields, WarningSchema } from "./chat.ts";
import {
  ErrorCodeSchema,
  ErrorMessageSchema,
  EventMessageSchema,
  PROTOCOL_VERSIONS,
  RequestIdSchema,
  RequestSchema,
  ResultMessageSchema,
} from "./messages.ts";
import { RESULT_SCHEMAS, WarmupProgressFields } from "./results.ts";

/**
 * The protocol as one JSON Schema (draft 2020-12) document, for hosts in other languages:
 * every request (params per method), event, result and error, generated from the same zod
 * schemas the core validates with. `bun run schema` writes it to docs/protocol.schema.json.
 *
 * Layout: `$defs` holds one schema per message kind; `x-methods` maps each method to its
 * request, result and events (as $refs); `x-events` lists the chat events.
 */

const SCHEMA_URI = "https://json-schema.org/draft/2020-12/schema";

function pascal(name: string): string {
  return name
    .split(/[._-]/)
    .map((p) => p.charAt(0).toUpperCase() + p.slice(1))
    .join("");
}

/** Params per method: each served method's own schema (its module is loaded for it). */
async function paramSchemas(): Promise<Map<string, z.ZodType>> {
  const params = new Map<string, z.ZodType>();
  for (const [name, entry] of buildRegistry({ testMethods: false }))
    params.set(name, (await entry.load()).params);
  return new Map([...params].sort(([a], [b]) => a.localeCompare(b)));
}

type JsonObject = Record<string, unknown>;

function defsOf(
  registry: z.core.$ZodRegistry<{ id: string }>,
  io: "input" | "output",
): Record<string, JsonObject> {
  const out = z.toJSONSchema(registry, { io, target: "draft-2020-12", uri: (id) => `#/$defs/${id}` });
  const defs: Record<string, JsonObject> = {};
  for (const [id, schema] of Object.entries(out.schemas)) {
    const { $schema: _s, $id: _i, ...rest } = schema as JsonObject;
    defs[id] = rest;
  }
  return defs;
}

export async function buildProtocolJsonSchema(): Promise<JsonObject> {
  // Shared pieces are registered in both passes so that both refer to them by name.
  const shared = (reg: z.core.$ZodRegistry<{ id: string }>) => {
    reg.add(RequestIdSchema, { id: "RequestId" });
    reg.add(ErrorCodeSchema, { id: "ErrorCode" });
    reg.add(WarningSchema, { id: "Warning" });
  };

  // Requests are read as input: a field with a default may be omitted.
  const requests = z.registry<{ id: string }>();
  shared(requests);
  requests.add(RequestSchema, { id: "Request" });
  const methods: Record<string, JsonObject> = {};
  for (const [method, params] of await paramSchemas()) {
    const base = `${pascal(method)}`;
    requests.add(params, { id: `${base}Params` });
    requests.add(z.object({ id: RequestIdSchema, method: z.literal(method), params: params.optional() }), {
      id: `${base}Request`,
    });
    methods[method] = {
      request: { $ref: `#/$defs/${base}Request` },
      params: { $ref: `#/$defs/${base}Params` },
    };
  }

  // Messages from the core are read as output: what is on the wire, defaults applied.
  const messages = z.registry<{ id: string }>();
  shared(messages);
  messages.add(EventMessageSchema, { id: "EventMessage" });
  messages.add(ResultMessageSchema, { id: "ResultMessage" });
  messages.add(ErrorMessageSchema, { id: "ErrorMessage" });
  for (const [method, result] of Object.entries(RESULT_SCHEMAS)) {
    const id = `${pascal(method)}Result`;
    messages.add(result, { id });
    methods[method] = { ...methods[method], result: { $ref: `#/$defs/${id}` } };
  }
  const events: Record<string, JsonObject> = {};
  for (const [name, fields] of Object.entries(ChatEventFields)) {
    const id = `${pascal(name)}Event`;
    // Loose: SPEC lists an event's typical fields; a core may add more without breaking hosts.
    const message = z
      .object({ id: RequestIdSchema, type: z.literal("event"), event: z.literal(name) })
      .extend((fields as z.ZodObject).shape)
      .loose();
    messages.add(message, { id });
    events[name] = { $ref: `#/$defs/${id}` };
  }
  methods.chat = { ...methods.chat, events: Object.values(events) };
  const progress = z
    .object({ id: RequestIdSchema, type: z.literal("event"), event: z.literal("warmup_progress") })
    .and(WarmupProgressFields);
  messages.add(progress, { id: "WarmupProgressEvent" });
  events.warmup_progress = { $ref: "#/$defs/WarmupProgressEvent" };
  methods.warmup = { ...methods.warmup, events: [events.warmup_progress] };

  const defs = { ...defsOf(requests, "input"), ...defsOf(messages, "output") };
  return {
    $schema: SCHEMA_URI,
    $id: "https://local-ai.invalid/protocol.schema.json",
    title: "local-ai stdio protocol",
    description:
      "NDJSON over stdin/stdout: one JSON object per line. Requests go host → core; events, results and errors come back, each with the request's id. Every request with a usable id gets exactly one result or error, after its events. Generated from the core's zod schemas by `bun run schema`; do not edit.",
    "x-protocol-versions": [...PROTOCOL_VERSIONS],
    "x-methods": Object.fromEntries(Object.entries(methods).sort(([a], [b]) => a.localeCompare(b))),
    "x-events": events,
    anyOf: [
      { $ref: "#/$defs/Request" },
      { $ref: "#/$defs/EventMessage" },
      { $ref: "#/$defs/ResultMessage" },
      { $ref: "#/$defs/ErrorMessage" },
    ],
    $defs: Object.fromEntries(Object.entries(defs).sort(([a], [b]) => a.localeCompare(b))),
  };
}

/** The committed file's text: stable key order, two-space indent, trailing newline. */
export async function protocolJsonSchemaText(): Promise<string> {
  return `${JSON.stringify(await buildProtocolJsonSchema(), null, 2)}\n`;
}
