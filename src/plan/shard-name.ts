/**
 * A split model's part as llama.cpp names it (`llama_split_path`: `<stem>-00001-of-00003.gguf`).
 * A name whose total is 0, or whose part is 0 or past its total, names no part of a split model:
 * llama.cpp loads such a file as it is, and a split of no parts gave no file to load at all.
 * Pure: the plan's shard reader and the hub's grouping both read names through it.
 */

export interface ShardName {
  stem: string;
  /** 1-based, within 1..total. */
  part: number;
  total: number;
}

const SHARD = /^(.*)-(\d{5})-of-(\d{5})\.gguf$/;
const SHARD_ANY_CASE = /^(.*)-(\d{5})-of-(\d{5})\.gguf$/i;

export function shardName(name: string, anyCase = false): ShardName | null {
  const m = (anyCase ? SHARD_ANY_CASE : SHARD).exec(name);
  if (!m) return null;
  const part = Number(m[2]);
  const total = Number(m[3]);
  if (part < 1 || part > total) return null;
  return { stem: m[1] as string, part, total };
}

/** The name of part `part` (1-based) of a split of `total`. */
export function shardFileName(stem: string, part: number, total: number): string {
  const five = (n: number) => String(n).padStart(5, "0");
  return `${stem}-${five(part)}-of-${five(total)}.gguf`;
}
