/**
 * JSON for llama-server with every string well-formed. A lone UTF-16 surrogate is valid in a JS
 * string and JSON.stringify writes it as `\ud800`, but llama-server's JSON parser refuses the
 * whole body with a 500 that quotes the text around it (docs/protocol.md, "Text"): one in a tool
 * result, a stored passage or a config's prompt would fail every turn that sends it. Such a
 * surrogate becomes U+FFFD, as a text decoder would make it; the host's own params are refused
 * before this (protocol/params-check.ts), so only what the core did not get from the host lands here.
 */
export function wellFormedJson(value: unknown): string {
  const text = JSON.stringify(value);
  // Only a string with a lone surrogate is written with such an escape (or text that spells one).
  return LONE_ESCAPE.test(text) ? JSON.stringify(value, wellFormedValue) : text;
}

/**
 * A JSON.stringify replacer: strings made well-formed, and an object's keys too (a replacer sees
 * values only, and an MCP server's tool schema can name a property with a lone surrogate).
 */
export function wellFormedValue(_key: string, value: unknown): unknown {
  if (typeof value === "string") return value.toWellFormed();
  if (value === null || typeof value !== "object" || Array.isArray(value)) return value;
  const keys = Object.keys(value);
  if (keys.every((key) => key.isWellFormed())) return value;
  // Defined, not assigned: a `__proto__` key (JSON.parse makes it an own key) would set the copy's
  // prototype and be lost.
  const fixed: Record<string, unknown> = {};
  for (const key of keys)
    Object.defineProperty(fixed, key.toWellFormed(), {
      value: (value as Record<string, unknown>)[key],
      enumerable: true,
      writable: true,
      configurable: true,
    });
  return fixed;
}

const LONE_ESCAPE = /\\ud[89a-f]/;
