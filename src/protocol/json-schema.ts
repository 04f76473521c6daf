import { z } from "zod";
import { PROTOCOL_VERSIONS } from "./capabilities.ts";
import { WarningSchema } from "./chat.ts";
import {
  ErrorCodeSchema,
  ErrorMessageSchema,
  EventMessageSchema,
  RequestIdSchema,
  RequestSchema,
  ResultMessageSchema,
} from "./messages.ts";

/**
 * The protocol as one JSON Schema (draft 2020-12) document, for hosts in other languages:
 * every request (params per method), event, result and error, generated from the method
 * definitions the core validates with (handed in by the caller: the definitions live above
 * this floor). `bun run schema` writes it to docs/protocol.schema.json.
 *
 * Layout: `$defs` holds one schema per message kind; `$defs.ProtocolIndex.const` maps each
 * method to its request, result and events (as $refs) and lists every event: a `const`, so
 * that strict validators (ajv) meet no unknown keyword.
 */

const SCHEMA_URI = "https://json-schema.org/draft/2020-12/schema";

/** What the export needs of each method: the schemas of its definition. */
export interface MethodSchemas {
  readonly name: string;
  readonly params: z.ZodType;
  result(): z.ZodType;
  /** Event name → the schema of its fields (an object, or a union of objects). */
  events(): Readonly<Record<string, z.ZodType>>;
}

function pascal(name: string): string {
  return name
    .split(/[._-]/)
    .map((p) => p.charAt(0).toUpperCase() + p.slice(1))
    .join("");
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

export function buildProtocolJsonSchema(definitions: readonly MethodSchemas[]): JsonObject {
  // Shared pieces are registered in both passes so that both refer to them by name.
  const shared = (reg: z.core.$ZodRegistry<{ id: string }>) => {
    reg.add(RequestIdSchema, { id: "RequestId" });
    reg.add(ErrorCodeSchema, { id: "ErrorCode" });
    reg.add(WarningSchema, { id: "Warning" });
  };
  const sorted = [...definitions].sort((a, b) => a.name.localeCompare(b.name));

  // Requests are read as input: a field with a default may be omitted.
  const requests = z.registry<{ id: string }>();
  shared(requests);
  requests.add(RequestSchema, { id: "Request" });
  const methods: Record<string, JsonObject> = {};
  for (const { name, params } of sorted) {
    const base = pascal(name);
    requests.add(params, { id: `${base}Params` });
    requests.add(z.object({ id: RequestIdSchema, method: z.literal(name), params: params.optional() }), {
      id: `${base}Request`,
    });
    methods[name] = {
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
  for (const { name, result } of definitions) {
    const id = `${pascal(name)}Result`;
    messages.add(result(), { id });
    methods[name] = { ...methods[name], result: { $ref: `#/$defs/${id}` } };
  }
  const events: Record<string, JsonObject> = {};
  for (const def of definitions) {
    const refs: JsonObject[] = [];
    for (const [event, fields] of Object.entries(def.events())) {
      const id = `${pascal(event)}Event`;
      if (!events[event]) {
        messages.add(eventMessage(event, fields), { id });
        events[event] = { $ref: `#/$defs/${id}` };
      }
      refs.push({ $ref: `#/$defs/${id}` });
    }
    if (refs.length > 0) methods[def.name] = { ...methods[def.name], events: refs };
  }

  const defs = { ...defsOf(requests, "input"), ...defsOf(messages, "output") };
  return {
    $schema: SCHEMA_URI,
    $id: "https://local-ai.invalid/protocol.schema.json",
    title: "local-ai stdio protocol",
    description:
      "NDJSON over stdin/stdout: one JSON object per line. Requests go host → core; events, results and errors come back, each with the request's id. Every request with a usable id gets exactly one result or error, after its events. Generated from the core's zod schemas by `bun run schema`; do not edit.",
    $comment: `Protocol versions: ${PROTOCOL_VERSIONS.join(", ")}. $defs.ProtocolIndex is not a message: its const lists the protocol versions, each method's request, params, result and events, and every event (as $refs), in keywords every validator knows (ajv's strict mode included).`,
    anyOf: [
      { $ref: "#/$defs/Request" },
      { $ref: "#/$defs/EventMessage" },
      { $ref: "#/$defs/ResultMessage" },
      { $ref: "#/$defs/ErrorMessage" },
    ],
    $defs: Object.fromEntries(
      Object.entries({
        ...unionTypesAsAnyOf(defs),
        ProtocolIndex: {
          const: {
            protocol_versions: [...PROTOCOL_VERSIONS],
            methods: Object.fromEntries(Object.entries(methods).sort(([a], [b]) => a.localeCompare(b))),
            events,
          },
        },
      }).sort(([a], [b]) => a.localeCompare(b)),
    ),
  };
}

/**
 * `{"type": ["string", "null"]}` as `{"anyOf": [{"type": "string"}, {"type": "null"}]}`: the
 * same meaning, which ajv's strict mode accepts without `allowUnionTypes`.
 */
function unionTypesAsAnyOf<T>(node: T): T {
  if (Array.isArray(node)) return node.map(unionTypesAsAnyOf) as T;
  if (!node || typeof node !== "object") return node;
  const out: JsonObject = {};
  for (const [key, value] of Object.entries(node)) out[key] = unionTypesAsAnyOf(value);
  if (Array.isArray(out.type) && out.anyOf === undefined) {
    out.anyOf = out.type.map((type) => ({ type }));
    delete out.type;
  }
  return out as T;
}

/**
 * One event as a message: id, type and event, then its fields beside them. Object fields stay loose
 * (docs/protocol.md lists an event's typical fields; a core may add more without breaking hosts); a
 * union of field sets (warmup_progress's phases) is joined to the envelope.
 */
function eventMessage(name: string, fields: z.ZodType): z.ZodType {
  const envelope = z.object({ id: RequestIdSchema, type: z.literal("event"), event: z.literal(name) });
  if (fields instanceof z.ZodObject) return envelope.extend(fields.shape).loose();
  return envelope.and(fields);
}

/** The committed file's text: stable key order, two-space indent, trailing newline. */
export function protocolJsonSchemaText(definitions: readonly MethodSchemas[]): string {
  return `${JSON.stringify(buildProtocolJsonSchema(definitions), null, 2)}\n`;
}
