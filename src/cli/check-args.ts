import type { ArgsDef } from "citty";

/**
 * What is wrong with a command's arguments, or null. citty parses leniently (node's parseArgs
 * with `strict: false`): a misspelt flag is dropped without a word and the command runs with
 * its defaults, so `doctor --confg x` would diagnose the wrong file. This check runs first, for
 * every command, and accepts exactly the spellings citty understands: `--name VALUE`,
 * `--name=VALUE`, a one-letter alias `-n`, `--no-name` for booleans; an option that takes a
 * value at most once.
 */
export function argsProblem(rawArgs: readonly string[], def: ArgsDef): string | null {
  const { flags, positionals } = flagTable(def);
  let seen = 0;
  // citty keeps the last of a repeated value: `--config a --config b` would use b without a word.
  const given = new Set<string>();
  // citty applies every `--no-name` after the rest: `--no-json --json` read as off, the last word lost.
  const switched = new Map<string, boolean>();
  for (let i = 0; i < rawArgs.length; i++) {
    const arg = rawArgs[i]!;
    if (arg === "--") {
      const rest = rawArgs.slice(i + 1);
      return seen + rest.length > positionals ? `unexpected argument '${rest[positionals - seen]}'` : null;
    }
    if (!arg.startsWith("-") || arg === "-") {
      if (++seen > positionals) return `unexpected argument '${arg}'`;
      continue;
    }
    const long = arg.startsWith("--");
    const body = arg.slice(long ? 2 : 1);
    const eq = body.indexOf("=");
    const name = eq === -1 ? body : body.slice(0, eq);
    const value = eq === -1 ? undefined : body.slice(eq + 1);
    const shown = `${long ? "--" : "-"}${name}`;
    const flag = long || name.length === 1 ? flags.get(name) : undefined;
    if (flag === undefined) {
      const negated = long && value === undefined ? flags.get(name.replace(/^no-/, "")) : undefined;
      if (negated?.kind === "boolean") {
        if (switched.get(negated.name) === true) return `option '--${negated.name}' given both on and off`;
        switched.set(negated.name, false);
        continue;
      }
      const near = closest(
        name,
        [...flags.keys()].filter((f) => f.length > 1),
      );
      return `unknown option '${shown}'${near ? ` (did you mean '--${near}'?)` : ""}`;
    }
    if (flag.kind === "boolean") {
      if (value !== undefined && value !== "true" && value !== "false")
        return `option '${shown}' takes no value (or true/false), got '${value}'`;
      const on = value !== "false";
      if (switched.get(flag.name) === !on) return `option '--${flag.name}' given both on and off`;
      switched.set(flag.name, on);
      continue;
    }
    if (given.has(flag.name)) return `option '--${flag.name}' given twice`;
    given.add(flag.name);
    if (value !== undefined) continue;
    const next = rawArgs[i + 1];
    if (next === undefined || (next.startsWith("--") && next.length > 2))
      return `option '${shown}' needs a value`;
    i++;
  }
  return null;
}

interface Flag {
  kind: "boolean" | "string";
  /** Its name in the definition, whichever spelling was used. */
  name: string;
}

function flagTable(def: ArgsDef): { flags: Map<string, Flag>; positionals: number } {
  const flags = new Map<string, Flag>();
  let positionals = 0;
  for (const [name, arg] of Object.entries(def)) {
    if (arg.type === "positional") {
      positionals++;
      continue;
    }
    const kind = arg.type === "boolean" ? "boolean" : "string";
    const alias = "alias" in arg ? arg.alias : undefined;
    const aliases = alias === undefined ? [] : Array.isArray(alias) ? alias : [alias];
    // citty also answers to the kebab-case spelling of a camelCase name.
    const kebab = name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
    for (const spelling of [name, kebab, ...aliases]) flags.set(spelling, { kind, name: kebab });
  }
  return { flags, positionals };
}

/** The known name within two edits of `name`, for a "did you mean" hint. */
function closest(name: string, known: string[]): string | undefined {
  let best: { name: string; distance: number } | undefined;
  for (const k of known) {
    const d = editDistance(name, k);
    if (d <= 2 && (!best || d < best.distance)) best = { name: k, distance: d };
  }
  return best?.name;
}

function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      row[j] = Math.min(prev[j]! + 1, row[j - 1]! + 1, prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    prev = row;
  }
  return prev[b.length]!;
}
