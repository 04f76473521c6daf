import type { z } from "zod";

/**
 * A config string holding a NUL character is refused naming its key: no file name, argument or
 * environment value can hold one, and Node's file and spawn calls throw on it far from the
 * config (`doctor` called such a config valid, then a chat ended `internal_error`).
 */
export function noNulCharacters(config: unknown, ctx: z.RefinementCtx): void {
  const stack: { value: unknown; path: (string | number)[] }[] = [{ value: config, path: [] }];
  for (let top = stack.pop(); top; top = stack.pop()) {
    const { value, path } = top;
    if (typeof value === "string") {
      if (value.includes("\0")) {
        ctx.addIssue({
          code: "custom",
          path,
          message: "contains a NUL character (\\0), which no path, argument or text may hold",
        });
        return;
      }
    } else if (Array.isArray(value)) {
      for (let i = 0; i < value.length; i++) stack.push({ value: value[i], path: [...path, i] });
    } else if (value !== null && typeof value === "object") {
      for (const [k, v] of Object.entries(value)) stack.push({ value: v, path: [...path, k] });
    }
  }
}
