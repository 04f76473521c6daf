/**
 * A server's answer to `initialize`, cut to what the SDK's client reads of it before its schema
 * (InitializeResultSchema) sees it. That schema makes each value it refuses an issue, and its
 * error message one JSON text of them all: 450,000 icons that are zeros (`serverInfo.icons`, a
 * line under 1 MiB and so not counted first: util/json-shape.ts) held the main loop about 1 s and
 * made an 88 MB message, at every start (a hostile review). The core reads none of the icons, the
 * capabilities' contents or the descriptions; what is kept is checked by the SDK as before.
 */
export function initializeEssentials(result: unknown): unknown {
  if (!isObject(result)) return result;
  const info = result.serverInfo;
  const kept: Record<string, unknown> = {
    protocolVersion: result.protocolVersion,
    // Capabilities the core does not enforce (no enforceStrictCapabilities): which ones, not what in them.
    capabilities: isObject(result.capabilities)
      ? Object.fromEntries(
          Object.keys(result.capabilities)
            .filter((k) => CAPABILITIES.has(k))
            .map((k) => [k, {}]),
        )
      : result.capabilities,
    serverInfo: isObject(info) ? { name: info.name, version: info.version } : info,
  };
  if (result.instructions !== undefined) kept.instructions = result.instructions;
  return kept;
}

/** The capabilities the SDK's schema knows, each of which may be an empty object. */
const CAPABILITIES = new Set([
  "experimental",
  "logging",
  "completions",
  "prompts",
  "resources",
  "tools",
  "tasks",
  "extensions",
]);

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}
