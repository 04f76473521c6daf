import { z } from "zod";
import { wholeCharCut } from "../util/text-cut.ts";

/**
 * A model on the hub as users write it: `org/name`, `org/name:Q4_K_M` (a quantization, matched
 * case-insensitively against the repo's GGUF names) or `org/name:path/in/repo.gguf` (one file).
 * In config.yaml it is prefixed: `model.path: hf:org/name:Q4_K_M`.
 */
export interface ModelRef {
  repo: string;
  /** A quantization such as Q4_K_M, when given instead of a file. */
  quant?: string;
  /** A file path inside the repo, when given. */
  file?: string;
  revision: string;
}

export const HF_PREFIX = "hf:";

// Hub repo ids: an owner and a name of letters, digits, '-', '_' and '.', not starting with '.'
// or '-' and without '--' or '..' (the hub refuses those; '--' would also break the cache folder name).
const REPO_PART = /^(?![.-])(?!.*(--|\.\.))[A-Za-z0-9._-]{1,96}$/;

export const RepoIdSchema = z.string().refine((s) => {
  const parts = s.split("/");
  return parts.length === 2 && parts.every((p) => REPO_PART.test(p));
}, "a hub repo is written org/name (letters, digits, '-', '_', '.')");

/** A quantization as users name it (Q4_K_M, iq3_xs, F16): matched against the repo's GGUF names. */
export const QuantSchema = z
  .string()
  .regex(/^[A-Za-z0-9_.-]{1,64}$/, "a quantization is letters, digits, '_', '.', '-' (such as Q4_K_M)")
  .refine((s) => !s.toLowerCase().endsWith(".gguf"), "that is a file: pass it as file, not quant");

/** A .gguf path inside a repo: no empty, '.' or '..' segments. */
export const RepoFileSchema = z
  .string()
  .max(1000)
  .refine((s) => s.toLowerCase().endsWith(".gguf"), "the file must be a .gguf")
  .refine(staysInRepo, "the file path must stay inside the repo (no '..', backslash or control character)");

/**
 * A file path the cache can hold under the repo's snapshot: what the hub's listing may not name
 * either (docs/models.md, `bad_listing`); on Windows a backslash ends a folder.
 */
function staysInRepo(path: string): boolean {
  return (
    !path.split("/").some((seg) => seg === "" || seg === "." || seg === "..") &&
    !/[\\\x00-\x1f\x7f]/.test(path)
  );
}

/**
 * A branch, tag or commit: it becomes a file under refs/ in the cache, so no '..' segment, no
 * leading '/' and only the characters git refs use in practice.
 */
export const RevisionSchema = z
  .string()
  .regex(
    /^[A-Za-z0-9._/-]{1,200}$/,
    "a revision is a branch, tag or commit (letters, digits, '.', '_', '/', '-')",
  )
  .refine(
    (s) => !s.split("/").some((seg) => seg === "" || seg === "." || seg === ".."),
    "a revision may not have empty, '.' or '..' parts",
  );

/** Parses `org/name[:QUANT|:file.gguf]` (without the `hf:` prefix); throws a message naming what is wrong. */
export function parseModelRef(text: string, revision = "main"): ModelRef {
  const colon = text.indexOf(":");
  const repo = colon === -1 ? text : text.slice(0, colon);
  const rest = colon === -1 ? "" : text.slice(colon + 1);
  // A message quotes at most the start of what it was given (a 100,000-character reference
  // made a 100 KB error line).
  const shown = JSON.stringify(text.length > 120 ? `${text.slice(0, wholeCharCut(text, 120))}…` : text);
  const checked = RepoIdSchema.safeParse(repo);
  if (!checked.success) throw new Error(`${shown}: ${checked.error.issues[0]?.message ?? "not a hub repo"}`);
  if (colon !== -1 && rest === "")
    throw new Error(`${shown}: nothing after ':' (write a quantization such as Q4_K_M, or a file)`);
  if (rest === "") return { repo, revision };
  if (rest.toLowerCase().endsWith(".gguf")) {
    if (!staysInRepo(rest))
      throw new Error(
        `${shown}: the file path must stay inside the repo (no '..', backslash or control character)`,
      );
    return { repo, file: rest, revision };
  }
  if (!/^[A-Za-z0-9_.-]+$/.test(rest))
    throw new Error(
      `${shown}: ${JSON.stringify(rest.slice(0, 64))} is neither a quantization nor a .gguf file`,
    );
  return { repo, quant: rest, revision };
}

/** `hf:org/name:Q4_K_M` → its ref; undefined for a plain path. */
export function parseHfModelPath(path: string): ModelRef | undefined {
  return path.startsWith(HF_PREFIX) ? parseModelRef(path.slice(HF_PREFIX.length)) : undefined;
}

/** What `local-ai pull` takes for this ref (for messages that say how to fetch a missing model). */
export function pullCommand(ref: ModelRef): string {
  const what = ref.file ?? ref.quant;
  const rev = ref.revision !== "main" ? ` --revision ${ref.revision}` : "";
  return `local-ai pull ${ref.repo}${what ? `:${what}` : ""}${rev}`;
}
