import type { z } from "zod";
import { firstStringPath } from "../util/string-path.ts";

/**
 * A config string holding a NUL character is refused naming its key: no file name, argument or
 * environment value can hold one, and Node's file and spawn calls throw on it far from the
 * config (`doctor` called such a config valid, then a chat ended `internal_error`).
 */
export function noNulCharacters(config: unknown, ctx: z.RefinementCtx): void {
  const path = firstStringPath(config, (text) => text.includes("\0"), { keys: false });
  if (path)
    ctx.addIssue({
      code: "custom",
      path,
      message: "contains a NUL character (\\0), which no path, argument or text may hold",
    });
}
