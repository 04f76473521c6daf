/**
 * The typed host client for local-ai: `import { LocalAiClient } from "@local-ai/client"` (dist/client).
 * Runs in Node (>= 18) and Electron main processes; it never needs Bun.
 */
export { CHAT_EVENT_NAMES, isChatEventName } from "./chat-events.ts";
export {
  type ChatOptions,
  type ChatStream,
  LocalAiClient,
  type PlanOptions,
  type StartedInfo,
  type StartedLocalAiClient,
} from "./client.ts";
export type { LocalAiClientOptions, RestartOptions, ShutdownOptions } from "./client-options.ts";
export type { ErrorDataByCode, ProjectorProblem, PullCause } from "./error-data.ts";
export {
  type AnyLocalAiError,
  CLIENT_ERROR_CODES,
  type ClientErrorCode,
  isLocalAiError,
  LocalAiError,
  type LocalAiErrorCode,
  type LocalAiErrorData,
} from "./errors.ts";
export type {
  AbortSignalLike,
  CallOptions,
  ClientLogger,
  CoreSpawnOptions,
  Environment,
  ExitInfo,
  SpawnFunction,
} from "./host-types.ts";
export type { ModelsApi } from "./models-api.ts";
export { RequestStream } from "./request-stream.ts";
export {
  type CoreBinaryCandidate,
  type CoreBinaryLayout,
  coreBinaryCandidates,
  coreTargetName,
  type ResolveCoreBinaryOptions,
  resolveCoreBinary,
} from "./resolve-core-binary.ts";
export { CORE_STOP_MARGIN_MS, DEFAULT_CORE_STOP_GRACE_MS } from "./shutdown-timing.ts";
export type * from "./types.ts";
