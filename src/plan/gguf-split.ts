import { quotedName } from "./gguf-scan.ts";

// Whether a split model's parts are one model's (gguf-read.ts reads them; the hub's headers too).

/** What a part's header says that matters here (gguf-read.ts GgufHeader). */
interface Part {
  metadata: Readonly<Record<string, unknown>>;
  tensors: readonly { name: string }[];
}

/**
 * Why a split's parts are not one model's, as llama.cpp checks them (llama-model-loader.cpp)
 * where the parts say it, or null. Parts of two splits (another model's, another version's) were
 * planned as this model, and llama-server then refused the set. Local files and the hub's alike.
 */
export function splitProblem(parts: readonly Part[]): string | null {
  if (parts.length < 2) return null;
  for (const [i, part] of parts.entries()) {
    const wrong = partProblem(part.metadata, i, parts.length);
    if (wrong) return `part ${i + 1} of ${parts.length}: ${wrong}`;
  }
  const tensors = parts.reduce((n, p) => n + p.tensors.length, 0);
  const twice = tensorInTwoParts(parts);
  if (twice) return twice;
  const listed = parts[0]?.metadata["split.tensors.count"];
  if (typeof listed === "number" && listed !== tensors)
    return `its ${parts.length} parts hold ${tensors} tensors where the first says ${listed} (parts of different models or versions?)`;
  return null;
}

/**
 * A tensor named in two parts (the halves of two cuts of one model), which llama.cpp's loader
 * refuses as it does a name given twice in one file (gguf-scan.ts): the plan counted it twice.
 */
function tensorInTwoParts(parts: readonly Pick<Part, "tensors">[]): string | null {
  const partOf = new Map<string, number>();
  for (const [i, part] of parts.entries()) {
    for (const t of part.tensors) {
      const before = partOf.get(t.name);
      const named = `the tensor ${quotedName(t.name)}`;
      if (before === i) return `${named} is given twice in part ${i + 1}`;
      if (before !== undefined) return `${named} is in parts ${before + 1} and ${i + 1}`;
      partOf.set(t.name, i);
    }
  }
  return null;
}

/**
 * What llama.cpp checks of a split's part (llama-model-loader.cpp) where the part says it:
 * `split.no` its place, `split.count` the parts the name gives. A part of another split (another
 * model's, another version's) was planned as this model's, and llama-server then refused the set.
 */
function partProblem(md: Part["metadata"], index: number, parts: number): string | null {
  const no = md["split.no"];
  if (typeof no === "number" && no !== index) return `its split.no says it is part ${no + 1}`;
  const count = md["split.count"];
  if (typeof count === "number" && count !== parts) return `it says its split has ${count} parts`;
  return null;
}
