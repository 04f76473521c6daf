import { llamaFlagName } from "./argv.ts";

/**
 * llama-server's flags (common/arg.cpp, b10587) whose value names files of weights applied to
 * every layer's K and V: a LoRA adapter and a control vector. Each takes a comma-separated list
 * (a CSV row, csvFields), the `-scaled` forms as `FNAME:SCALE`; given twice, both lists load. The flags alone name the
 * path, not the weights: an adapter retrained and written over the old file is another cache
 * (agent/kv/fingerprint.ts), and a server that re-reads it (waking from an idle sleep) computes
 * with other weights than it started with (runtime/launch.ts `filesUnchanged`).
 */
const FILE_FLAGS: ReadonlyMap<string, boolean> = new Map([
  ["--lora", false],
  ["--lora-scaled", true],
  ["--control-vector", false],
  ["--control-vector-scaled", true],
]);

/** The adapter and control vector files `args` load, in order. */
export function adapterFiles(args: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] as string;
    const scaled = FILE_FLAGS.get(llamaFlagName(arg));
    if (scaled === undefined) continue;
    const eq = arg.startsWith("--") ? arg.indexOf("=") : -1;
    const value = eq > 0 ? arg.slice(eq + 1) : args[++i];
    for (const item of csvFields(value ?? "")) {
      // `FNAME:SCALE`: the scale is after the last colon (a Windows path has one of its own).
      const at = scaled ? item.lastIndexOf(":") : -1;
      const file = at > 0 ? item.slice(0, at) : item;
      if (file !== "") out.push(file);
    }
  }
  return out;
}

/**
 * A list as llama-server reads it (common/arg.cpp `parse_csv_row`): fields split at commas, one
 * that opens with `"` quoted up to the next lone `"` (commas kept, `""` one quote), a quote
 * anywhere else a character. Split at every comma, a path holding one named two files that do
 * not exist, and the launch had no fingerprint: prompt reuse was off, and nothing said why.
 */
function csvFields(value: string): string[] {
  const fields: string[] = [];
  let field = "";
  let quoted = false;
  for (let i = 0; i < value.length; i++) {
    const ch = value[i] as string;
    if (quoted && ch === '"' && value[i + 1] === '"') {
      field += '"';
      i++;
    } else if (ch === '"' && (quoted || field === "")) quoted = !quoted;
    else if (ch === "," && !quoted) {
      fields.push(field);
      field = "";
    } else field += ch;
  }
  fields.push(field);
  return fields;
}
