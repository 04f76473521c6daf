/**
 * The names a JSON Schema's author chose as llama-server's converter reads them: a property
 * name's or `$ref`'s run of bytes its rule names cannot take, and what a `$ref` points to, as a
 * validator and as the converter resolve it. schema-problem.ts judges the schema with these.
 */

type Node = Record<string, unknown>;
const isNode = (v: unknown): v is Node => typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * Most bytes (UTF-8) in a row outside `A-Z a-z 0-9 -` a property name or `$ref` may hold.
 * llama-server's converter makes grammar rule names of them with std::regex `[^a-zA-Z0-9-]+`,
 * whose matcher recurses once per byte of such a run: about 1,700 bytes overflowed a 512 KiB
 * thread stack (macOS gives its HTTP threads no more), about 25,000 an 8 MiB one, and the server
 * crashed (common/json-schema-to-grammar.cpp `_add_rule`, `_resolve_ref`).
 */
export const MAX_NAME_RUN_BYTES = 256;

/** A property name or `$ref` of `node` past MAX_NAME_RUN_BYTES, named by its place, or undefined. */
export function nameRunProblem(node: Node, pointer: string): string | undefined {
  const why = `bytes in a row outside A-Z, a-z, 0-9 and -; at most ${MAX_NAME_RUN_BYTES} are taken (llama-server's converter crashes on more)`;
  const refRun = typeof node.$ref === "string" ? longestRun(node.$ref) : 0;
  if (refRun > MAX_NAME_RUN_BYTES) return `the $ref at ${pointer} has ${refRun} ${why}`;
  if (!isNode(node.properties)) return undefined;
  for (const name of Object.keys(node.properties)) {
    const run = longestRun(name);
    if (run > MAX_NAME_RUN_BYTES) return `a property name at ${pointer}/properties has ${run} ${why}`;
  }
  return undefined;
}

/**
 * The longest run of UTF-8 bytes outside `A-Za-z0-9-` in `text`, in one pass over its code
 * units: a schema's worth of names split into runs (and a Buffer per run) held the loop tens of
 * milliseconds. A surrogate pair is 4 bytes, a lone surrogate 3 (UTF-8 writes U+FFFD for it).
 */
function longestRun(text: string): number {
  let longest = 0;
  let run = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if ((c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a) || c === 0x2d) {
      run = 0;
      continue;
    }
    const pair = c >= 0xd800 && c <= 0xdbff && (text.charCodeAt(i + 1) & 0xfc00) === 0xdc00;
    if (pair) i++;
    run += pair ? 4 : c < 0x80 ? 1 : c < 0x800 ? 2 : 3;
    if (run > longest) longest = run;
  }
  return longest;
}

/**
 * What a `$ref` names in the document, as a validator reads it and as llama-server does: the two
 * differ, and a cycle either one follows is one. Only llama-server's cannot see `#/$defs/a~1b` as
 * a cycle through `a~1b`, `%41` as one through `%41`, or `#/allOf/0x` as `allOf[0]`, which its
 * converter followed without end (a crash: common/json-schema-to-grammar.cpp, allOf's components).
 */
export function refTargets(root: Node, ref: string): Node[] {
  const read = resolveLocal(root, ref);
  const llama = resolveAsLlama(root, ref);
  return [read, llama].filter((n, i, all): n is Node => n !== undefined && all.indexOf(n) === i);
}

/**
 * A `#/` pointer's target as llama-server's converter finds it (resolve_refs): each token between
 * slashes used as it is (no `~1`, `~0` or `%` escapes), an array's index read as C's `strtoull`
 * reads it (blanks, then a sign, then digits, the rest ignored: `" 0"`, `"+0"`, `"-0"`, `"0x"`).
 */
function resolveAsLlama(root: Node, ref: string): Node | undefined {
  if (!ref.startsWith("#/")) return undefined;
  let at: unknown = root;
  for (const token of ref.slice(2).split("/")) {
    if (isNode(at) && Object.hasOwn(at, token)) at = at[token];
    else if (Array.isArray(at)) {
      const index = strtoullIndex(token);
      if (index === undefined || index >= at.length) return undefined;
      at = at[index];
    } else return undefined;
  }
  return isNode(at) ? at : undefined;
}

/**
 * `token` as `strtoull` reads it, where that is an index at all: a minus sign negates modulo 2^64
 * (`-18446744073709551615` is 1); past 2^64 - 1 is out of range (std::stoull throws: refused).
 */
function strtoullIndex(token: string): number | undefined {
  const m = /^[\t\n\v\f\r ]*([+-]?)0*(\d+)/.exec(token);
  const magnitude = m && (m[2] as string).length <= 20 ? BigInt(m[2] as string) : 2n ** 64n;
  if (!m || magnitude >= 2n ** 64n) return undefined;
  const value = m[1] === "-" ? (2n ** 64n - magnitude) % 2n ** 64n : magnitude;
  return value <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(value) : undefined;
}

/** A `#`-pointer's target in the document; undefined for other documents or a dangling pointer. */
function resolveLocal(root: Node, ref: string): Node | undefined {
  if (!ref.startsWith("#")) return undefined;
  let at: unknown = root;
  const body = ref.slice(1);
  if (body === "") return root;
  if (!body.startsWith("/")) return undefined;
  for (const raw of body.slice(1).split("/")) {
    let key: string;
    try {
      key = decodeURIComponent(raw).replaceAll("~1", "/").replaceAll("~0", "~");
    } catch {
      return undefined;
    }
    if (typeof at !== "object" || at === null || !Object.hasOwn(at, key)) return undefined;
    at = (at as Record<string, unknown>)[key];
  }
  return isNode(at) ? at : undefined;
}
