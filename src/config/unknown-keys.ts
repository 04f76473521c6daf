import type { z } from "zod";
import { CoreError } from "../protocol/errors.ts";

/**
 * Keys present in `value` that the schema does not declare, as dotted paths. zod strips them
 * silently; a host developer with a typo (`max_step:`) deserves a warning instead.
 */
export function unknownKeys(schema: z.ZodType, value: unknown, path: string[] = []): string[] {
  const inner = unwrap(schema);
  const def = inner._zod.def as { type: string; shape?: Record<string, z.ZodType>; element?: z.ZodType };
  if (def.type === "object" && def.shape && isPlainObject(value)) {
    const out: string[] = [];
    for (const [key, child] of Object.entries(value)) {
      // Own keys only: `toString:` or `__proto__:` in the file would otherwise find Object's
      // prototype members as schemas and crash the loader instead of being an unknown key.
      const childSchema = Object.hasOwn(def.shape, key) ? def.shape[key] : undefined;
      if (!childSchema) out.push([...path, key].join("."));
      else out.push(...unknownKeys(childSchema, child, [...path, key]));
    }
    return out;
  }
  if (def.type === "array" && def.element && Array.isArray(value)) {
    return value.flatMap((item, i) => unknownKeys(def.element!, item, [...path, String(i)]));
  }
  return [];
}

/**
 * A YAML merge key (`<<: *defaults`) where the config's sections are read: the loader reads YAML
 * 1.2, where `<<` is an ordinary key, so the merged values would be dropped with an
 * unknown-key warning and the core would start on defaults the author meant to replace
 * (docs/bootstrap.md).
 */
export function refuseMergeKey(
  unknown: readonly string[],
  file: string,
  lineOf: (key: string) => number | undefined,
  show: (key: string) => string,
): void {
  const key = unknown.find((k) => k === "<<" || k.endsWith(".<<"));
  if (key === undefined) return;
  const line = lineOf(key) ?? null;
  const shownKey = show(key);
  throw new CoreError(
    "config_invalid",
    `${line ? `${file}:${line}` : file}: ${shownKey}: YAML merge keys are not supported; write the keys out`,
    { file, line, key: shownKey },
  );
}

function unwrap(schema: z.ZodType): z.ZodType {
  let current = schema;
  for (;;) {
    const def = current._zod.def as { type: string; innerType?: z.ZodType; in?: z.ZodType; out?: z.ZodType };
    if (
      def.innerType &&
      ["default", "prefault", "optional", "nullable", "catch", "readonly"].includes(def.type)
    ) {
      current = def.innerType;
    } else if (def.type === "pipe" && def.in) {
      // A preprocess is a pipe from a transform: the shape is on its output side.
      const from = (def.in._zod.def as { type: string }).type;
      current = from === "transform" && def.out ? def.out : def.in;
    } else {
      return current;
    }
  }
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}
