#!/usr/bin/env bun
/**
 * Writes src/client/protocol-types.ts: the protocol's types (z.infer / z.input of the core's zod
 * schemas) printed out as plain TypeScript, so the client's .d.ts needs no zod. The TypeScript
 * checker expands each type; test/client/protocol-types.test.ts fails when the file is stale and
 * proves each printed type equal to its zod original.
 *   bun scripts/client-types.ts          write the file
 *   bun scripts/client-types.ts --check  exit 1 when the committed file differs
 */
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import ts from "typescript";

const ROOT = join(import.meta.dir, "..");
export const OUTPUT = join(ROOT, "src/client/protocol-types.ts");

/** Name → the expression whose type is printed, evaluated in a probe file beside src/. */
const TYPES: [name: string, expr: string, doc: string][] = [
  ["RequestId", "z.infer<typeof RequestIdSchema>", "A request id: echoed back exactly, type included."],
  [
    "ErrorCode",
    "z.infer<typeof ErrorCodeSchema>",
    "Every error code the core may send (docs/protocol.md#errors).",
  ],
  ["ErrorReason", "z.infer<typeof ErrorReasonSchema>", "What an error's `data.reason` may say."],
  [
    "ChatParams",
    "z.input<typeof ChatParamsSchema>",
    "What `chat` accepts: every field has a default on the core's side.",
  ],
  ["ChatResult", "z.infer<typeof ChatResultSchema>", "The final answer of a chat."],
  ["Warning", "z.infer<typeof WarningSchema>", "A runtime notice attached to a chat result."],
  ["ChatEventName", "keyof typeof ChatEventFields", "The chat event names."],
  [
    "ChatEvent",
    // An event without fields (memory_start) infers as Record<string, never>, which would make
    // id/type/event `never` in the intersection; it contributes {} instead.
    '{ [K in keyof typeof ChatEventFields]: { id: __RequestId; type: "event"; event: K } & (string extends keyof z.infer<(typeof ChatEventFields)[K]> ? {} : z.infer<(typeof ChatEventFields)[K]>) }[keyof typeof ChatEventFields]',
    "One chat event: its fields sit beside id, type and event.",
  ],
  ["InitializeParams", "z.input<typeof InitializeParamsSchema>", "What `initialize` accepts."],
  ["WarmupParams", "z.input<typeof WarmupParamsSchema>", "What `warmup` accepts."],
  [
    "WarmupEvent",
    '{ id: __RequestId; type: "event"; event: "warmup_progress" } & z.infer<typeof WarmupProgressFields>',
    "Progress of `warmup`: llama-server starting, loading the model, ready.",
  ],
  ["WarmupResult", "z.infer<typeof WarmupResultSchema>", "The result of warmup: llama-server is ready."],
  [
    "InitializeResult",
    "z.infer<ReturnType<typeof initializeResultSchema>>",
    "The core's answer to initialize.",
  ],
  ["StatusResult", "z.infer<ReturnType<typeof okResultSchema>>", "The result of ping and shutdown."],
  ["CancelResult", "z.infer<typeof CancelResultSchema>", "The result of cancel."],
  ["DoctorCheck", "z.infer<typeof DoctorCheckSchema>", "One diagnostic of doctor."],
  [
    "DoctorResult",
    "z.infer<typeof DoctorResultSchema>",
    "The result of doctor (same data as `local-ai doctor --json`).",
  ],
  [
    "PlanResult",
    "z.infer<typeof PlanReportSchema>",
    "The result of plan (same data as `local-ai plan --json`).",
  ],
  [
    "ModelsResult",
    "z.infer<typeof ModelsResultSchema>",
    "The result of models (same data as `local-ai models --json`).",
  ],
  [
    "CoreStatusResult",
    "z.infer<ReturnType<typeof statusResultSchema>>",
    "The result of status: llama-server's state, memory, slots, restarts, and the requests in flight.",
  ],
  ["PullParams", "z.input<typeof PullParamsSchema>", "What `pull` accepts: a repo and a quant or file."],
  [
    "PullEvent",
    '{ id: __RequestId; type: "event"; event: "download_progress" } & z.infer<typeof DownloadProgressFields>',
    "Progress of `pull`: file, bytes done, total, rate, ETA.",
  ],
  [
    "PullResult",
    "z.infer<typeof PullResultSchema>",
    "The result of pull: the local path, size, SHA-256 and fit verdict.",
  ],
  ...(
    [
      ["SessionsList", "`sessions.list`"],
      ["SessionsGet", "`sessions.get`"],
      ["SessionsRename", "`sessions.rename`"],
      ["SessionsDelete", "`sessions.delete`"],
      ["SessionsSearch", "`sessions.search`"],
      ["SessionsExport", "`sessions.export`"],
      ["SessionsAttachment", "`sessions.attachment`"],
      ["UsersDelete", "`users.delete`"],
    ] as const
  ).flatMap(([name, method]): [string, string, string][] => [
    [`${name}Params`, `z.input<typeof S.${name}ParamsSchema>`, `What ${method} accepts.`],
    [`${name}Result`, `z.infer<typeof S.${name}ResultSchema>`, `The result of ${method}.`],
  ]),
  ["SessionSummary", "z.infer<typeof S.SessionSummarySchema>", "One session in `sessions.list`."],
  ...(
    [
      ["DocumentsAdd", "`documents.add`"],
      ["DocumentsList", "`documents.list`"],
      ["DocumentsDelete", "`documents.delete`"],
    ] as const
  ).flatMap(([name, method]): [string, string, string][] => [
    [`${name}Params`, `z.input<typeof D.${name}ParamsSchema>`, `What ${method} accepts.`],
    [`${name}Result`, `z.infer<typeof D.${name}ResultSchema>`, `The result of ${method}.`],
  ]),
  [
    "DocumentsAddEvent",
    '{ id: __RequestId; type: "event"; event: "index_progress" } & z.infer<typeof D.IndexProgressSchema>',
    "Progress of `documents.add`: its phase, done of total.",
  ],
  ["DocumentSummary", "z.infer<typeof D.DocumentSummarySchema>", "One document in `documents.list`."],
  ["Source", "z.infer<typeof SourceSchema>", "A citation: where an answer came from."],
  ["EmbedParams", "z.input<typeof EmbedParamsSchema>", "What `embed` accepts."],
  ["EmbedResult", "z.infer<typeof EmbedResultSchema>", "The result of `embed`: one vector per input."],
  ["StoredMessage", "z.infer<typeof S.StoredMessageSchema>", "One message of `sessions.get`."],
  [
    "WarmupProgress",
    "z.infer<typeof WarmupProgressFields>",
    "The fields of a `warmup_progress` event (warmup's, and a chat's while llama-server starts or wakes).",
  ],
  [
    "PlanParams",
    "z.input<typeof PlanParamsSchema>",
    "What `plan` accepts: `model`, else model.path; other keys are ignored.",
  ],
  ["ModelsLoadParams", "z.input<typeof ModelsLoadParamsSchema>", "What `models.load` accepts."],
  [
    "ModelsLoadEvent",
    // Its only event is warmup's (test/client/protocol-types.test.ts proves it), so it is named so.
    "__WarmupEvent",
    "Progress of `models.load`: `warmup_progress`, with `waiting_for_memory` while other models hold the room.",
  ],
  [
    "ModelsLoadResult",
    "z.infer<typeof ModelsLoadResultSchema>",
    "The result of `models.load`: the model as given, its state and what its plan holds of the memory budget.",
  ],
  ["ModelsUnloadParams", "z.input<typeof ModelsUnloadParamsSchema>", "What `models.unload` accepts."],
  [
    "ModelsUnloadResult",
    "z.infer<typeof ModelsUnloadResultSchema>",
    "The result of `models.unload`: `unloaded` false when it was not loaded.",
  ],
];

const PROBE_HEADER = `import type { z } from "zod";
import type { CancelResultSchema } from "./protocol/cancel.ts";
import type { ChatEventFields, ChatParamsSchema, ChatResultSchema, WarningSchema } from "./protocol/chat.ts";
import type { DoctorCheckSchema, DoctorResultSchema } from "./protocol/doctor.ts";
import type { InitializeParamsSchema, initializeResultSchema } from "./protocol/initialize.ts";
import type { ErrorCodeSchema, ErrorReasonSchema, RequestIdSchema } from "./protocol/messages.ts";
import type { ModelsResultSchema } from "./protocol/models.ts";
import type { okResultSchema } from "./protocol/ping.ts";
import type { PlanParamsSchema, PlanReportSchema } from "./protocol/plan.ts";
import type { ModelsLoadParamsSchema, ModelsLoadResultSchema } from "./protocol/models-load.ts";
import type { ModelsUnloadParamsSchema, ModelsUnloadResultSchema } from "./protocol/models-unload.ts";
import type { DownloadProgressFields, PullParamsSchema, PullResultSchema } from "./protocol/pull.ts";
import type * as S from "./protocol/sessions.ts";
import type * as D from "./protocol/documents.ts";
import type { EmbedParamsSchema, EmbedResultSchema } from "./protocol/embed.ts";
import type { SourceSchema } from "./protocol/sources.ts";
import type { statusResultSchema } from "./protocol/status.ts";
import type { WarmupParamsSchema, WarmupResultSchema } from "./protocol/warmup.ts";
import type { WarmupProgressFields } from "./protocol/warmup-progress.ts";
`;

export function generateClientTypes(): string {
  const probePath = join(ROOT, "src", "__client_types_probe.ts");
  const probe = PROBE_HEADER + TYPES.map(([name, expr]) => `export type __${name} = ${expr};\n`).join("");
  const config = ts.getParsedCommandLineOfConfigFile(
    join(ROOT, "tsconfig.json"),
    {},
    {
      ...ts.sys,
      onUnRecoverableConfigFileDiagnostic: (d) => {
        throw new Error(ts.flattenDiagnosticMessageText(d.messageText, "\n"));
      },
    },
  );
  if (!config) throw new Error("cannot read tsconfig.json");
  const host = ts.createCompilerHost(config.options);
  const readFile = host.readFile.bind(host);
  host.readFile = (f) => (f === probePath ? probe : readFile(f));
  const fileExists = host.fileExists.bind(host);
  host.fileExists = (f) => f === probePath || fileExists(f);
  const getSourceFile = host.getSourceFile.bind(host);
  host.getSourceFile = (f, lang, ...rest) =>
    f === probePath ? ts.createSourceFile(f, probe, lang, true) : getSourceFile(f, lang, ...rest);
  const program = ts.createProgram([probePath], config.options, host);
  const checker = program.getTypeChecker();
  const source = program.getSourceFile(probePath)!;
  const errors = ts.getPreEmitDiagnostics(program, source);
  if (errors.length > 0) throw new Error(ts.formatDiagnostics(errors, host));

  const flags =
    ts.TypeFormatFlags.NoTruncation |
    ts.TypeFormatFlags.InTypeAlias |
    ts.TypeFormatFlags.MultilineObjectLiterals |
    ts.TypeFormatFlags.UseSingleQuotesForStringLiteralType;
  const printed = new Map<string, string>();
  ts.forEachChild(source, (node) => {
    if (!ts.isTypeAliasDeclaration(node)) return;
    const type = checker.getTypeAtLocation(node.name);
    // Probe aliases (__Name) that the checker prints by name become the generated names.
    printed.set(node.name.text.slice(2), checker.typeToString(type, node, flags).replace(/\b__(\w+)/g, "$1"));
  });
  // A type given as another generated one (`__Name`) is printed as that name, not expanded again.
  for (const [name, expr] of TYPES) if (/^__\w+$/.test(expr)) printed.set(name, expr.slice(2));

  let out =
    "// Generated by scripts/client-types.ts from the core's zod schemas. Do not edit: run `bun run build:client`.\n" +
    "// test/client/protocol-types.test.ts fails when this file is stale.\n";
  for (const [name, , doc] of TYPES) {
    out += `\n/** ${doc} */\nexport type ${name} = ${printed.get(name)};\n`;
  }
  return out;
}

/** The file's text as committed: generated, then formatted by the project's formatter. */
export function clientTypesText(): string {
  const formatted = Bun.spawnSync(
    [join(ROOT, "node_modules/.bin/biome"), "format", `--stdin-file-path=${OUTPUT}`],
    {
      stdin: new TextEncoder().encode(generateClientTypes()),
    },
  );
  if (formatted.exitCode !== 0) throw new Error(`formatting ${OUTPUT} failed: ${formatted.stderr}`);
  return formatted.stdout.toString();
}

/** Writes the file when it changed; returns whether it did. */
export function writeClientTypes(): boolean {
  const text = clientTypesText();
  if (readFileSync(OUTPUT, "utf8") === text) return false;
  writeFileSync(OUTPUT, text);
  return true;
}

if (import.meta.main) {
  if (process.argv.includes("--check")) {
    if (readFileSync(OUTPUT, "utf8") !== clientTypesText()) {
      console.error(`${OUTPUT} is stale: run bun scripts/client-types.ts`);
      process.exit(1);
    }
  } else {
    console.error(writeClientTypes() ? `wrote ${OUTPUT}` : `${OUTPUT} is current`);
  }
}
