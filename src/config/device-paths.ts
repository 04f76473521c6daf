import * as nodePath from "node:path";
import type { z } from "zod";
import { HF_PREFIX } from "../protocol/model-ref.ts";
import { windowsDevicePath } from "../util/device-path.ts";
import type { PathRules } from "../util/full-path.ts";
import { oneLine } from "../util/one-line.ts";

/** The config's paths as written (before the loader resolves them), each with its key. */
function pathsOf(config: unknown): [(string | number)[], string][] {
  const c = (config ?? {}) as Record<string, Record<string, unknown> | undefined>;
  const out: [(string | number)[], string][] = [];
  const add = (key: (string | number)[], value: unknown) => {
    if (typeof value === "string") out.push([key, value]);
  };
  add(["app", "data_dir"], c.app?.data_dir);
  add(["llama", "binary"], c.llama?.binary);
  const model = (key: (string | number)[], m: Record<string, unknown> | undefined) => {
    if (typeof m?.path === "string" && !m.path.startsWith(HF_PREFIX)) add([...key, "path"], m.path);
    if (typeof m?.mmproj === "string" && !["auto", "none"].includes(m.mmproj))
      add([...key, "mmproj"], m.mmproj);
  };
  model(["model"], c.model);
  const list = (v: unknown) => (Array.isArray(v) ? (v as unknown[]) : []);
  list(c.models).forEach((m, i) => {
    model(["models", i], m as Record<string, unknown>);
  });
  list(c.mcp_servers).forEach((s, i) => {
    const server = s as Record<string, unknown>;
    // A bare command name is looked up on PATH; one with a separator is a path.
    if (typeof server?.command === "string" && /[\\/]/.test(server.command))
      add(["mcp_servers", i, "command"], server.command);
    add(["mcp_servers", i, "cwd"], server?.cwd);
  });
  list(c.memory?.folders).forEach((f, i) => {
    add(["memory", "folders", i], f);
  });
  return out;
}

/**
 * A config path that names a Windows device or pipe (util/device-path.ts) is refused naming its
 * key: the loader's stat of `model.path`, a folder's walk or a spawn would open it (a named
 * pipe's server connected to), far from the config. `rules`: path.win32 in tests.
 */
export function noDevicePaths(config: unknown, ctx: z.RefinementCtx, rules: PathRules = nodePath): void {
  for (const [path, value] of pathsOf(config)) {
    const why = windowsDevicePath(value, rules);
    if (why) ctx.addIssue({ code: "custom", path, message: `${oneLine(value)} ${why}` });
  }
}
