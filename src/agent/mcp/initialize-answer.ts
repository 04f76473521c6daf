/**
 * A server's answer to `initialize`, cut to what the SDK's client reads of it before its schema
 * (InitializeResultSchema) sees it. That schema makes each value it refuses an issue, and its
 * error message one JSON text of them all: 450,000 icons that are zeros (`serverInfo.icons`, a
 * line under 1 MiB, then not counted first: util/json-shape.ts) held the main loop about 1 s and
 * made an 88 MB message, at every start (a hostile review). The core reads none of the icons, the
 * capabilities' contents or the descriptions; what is kept is checked by the SDK as before.
 * The client keeps the answer for the server's life, and the core reads neither its instructions
 * (left out) nor the server's name and version (cut): a line of up to 16 MiB was held so, each.
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
    serverInfo: isObject(info) ? { name: cut(info.name), version: cut(info.version) } : info,
  };
  return kept;
}

/** A server name or version as kept; anything but a string is left for the SDK's schema to refuse. */
const KEPT_CHARS = 256;
const cut = (v: unknown) => (typeof v === "string" ? v.slice(0, KEPT_CHARS) : v);

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
