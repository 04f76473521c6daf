import { gguf } from "@huggingface/gguf";
import { type GgufHeader, headerOfParsed } from "../plan/gguf-read.ts";
import { GgufInvalid } from "../plan/gguf-scan.ts";
import { splitProblem } from "../plan/gguf-split.ts";
import { type ModelInfo, modelInfo } from "../plan/model.ts";
import { CoreError, isCoreError } from "../protocol/errors.ts";
import type { ModelRef } from "../protocol/model-ref.ts";
import { listedNames, namesText } from "../util/listed-names.ts";
import { type HubAccess, hubFetch, listRepoFiles, resolveUrl, unreachable } from "./hub-listing.ts";
import { missingText, pickGguf } from "./pick-gguf.ts";
import { quantizationOf } from "./quantization.ts";

/**
 * A model still on the hub, known from its header alone (for the remote fit check and for
 * `plan` of a model not pulled yet), read with HTTP range requests (@huggingface/gguf asks for 2 MB chunks until the tensor table ends; a split model
 * reads each part's header), never the weights. The token travels in a header, to the hub's
 * origin only (see hubFetch); it is in no URL, message or log.
 */

export interface RemoteModel {
  repo: string;
  revision: string;
  /** The model's file in the repo (a split model's first part). */
  file: string;
  files: string[];
  size_bytes: number;
  /** The LFS SHA-256 of `file`, as the listing gives it. */
  sha256: string | null;
  quantization: string;
  model: ModelInfo;
}

/** Edges a test replaces: the fetch (the hub stand-in), the home folder. */
export interface RemoteDeps {
  fetch?: typeof fetch;
  home?: string;
  signal?: AbortSignal;
}

function missing(problem: string, message: string, data: Record<string, unknown>): CoreError {
  return new CoreError("model_missing", message, { problem, ...data });
}

/** Lists the repo, picks the file the ref means, reads its header (every part's) by range requests. */
export async function readRemoteModel(
  ref: ModelRef,
  access: HubAccess,
  signal?: AbortSignal,
): Promise<RemoteModel> {
  const listing = await listRepoFiles(access, ref.repo, ref.revision, signal);
  const pick = pickGguf(
    listing.map((f) => f.path),
    ref,
  );
  const what = { repo: ref.repo, revision: ref.revision };
  if (pick.kind === "many")
    throw missing(
      "ambiguous",
      `${ref.repo}: ${pick.matches.length} files match ${ref.quant ?? "the ref"}: ${namesText(pick.matches)}; name one`,
      { ...what, ...listedNames("matches", pick.matches) },
    );
  if (pick.kind === "none") {
    const wanted = ref.file ?? (ref.quant ? `a ${ref.quant} GGUF` : "a GGUF model");
    const has = pick.available.length ? namesText(pick.available) : "no GGUF model";
    throw missing("hub_not_found", `${ref.repo}: the repo has no ${wanted} (it has ${has})`, {
      ...what,
      ...listedNames("available", pick.available),
    });
  }
  const { group } = pick;
  if (group.missing.length > 0)
    throw missing(
      "incomplete_split",
      `${ref.repo}: split model ${group.first} lacks ${missingText(group)} on the hub`,
      what,
    );
  const byPath = new Map(listing.map((f) => [f.path, f]));
  const headers: GgufHeader[] = [];
  for (const part of group.parts) {
    headers.push(await readPartHeader(access, ref, part, byPath.get(part)?.size ?? 0, signal));
  }
  const wrong = splitProblem(headers);
  if (wrong)
    throw missing("not_gguf", `${ref.repo}: split model ${group.first} is not one split model: ${wrong}`, {
      ...what,
      file: group.first,
    });
  const header = mergeParts(headers);
  const model = modelInfo(header);
  return {
    repo: ref.repo,
    revision: ref.revision,
    file: group.first,
    files: group.parts,
    size_bytes: header.size_bytes,
    sha256: byPath.get(group.first)?.sha256 ?? null,
    quantization: quantizationOf(header, model),
    model,
  };
}

async function readPartHeader(
  access: HubAccess,
  ref: ModelRef,
  file: string,
  size: number,
  signal: AbortSignal | undefined,
): Promise<GgufHeader> {
  const url = resolveUrl(access.endpoint, ref.repo, ref.revision, file);
  const label = `${ref.repo} ${file}`;
  const data = { repo: ref.repo, revision: ref.revision, file };
  let parsed: Awaited<ReturnType<typeof gguf>>;
  try {
    parsed = await gguf(url, { fetch: rangedFetch(access, { repo: ref.repo, file }, signal) });
  } catch (err) {
    if (isCoreError(err) || signal?.aborted) throw err;
    if (err instanceof Error && err.name === "TimeoutError") throw unreachable(access, label, data, err);
    const message = err instanceof Error ? err.message : String(err);
    if (REFUSED_CONTENT.test(message))
      throw missing(
        "not_gguf",
        `${label}: not a GGUF: ${message.replace(/^not a valid gguf file: /i, "")}`,
        data,
      );
    throw missing("truncated", `${label}: the header could not be read to its end (${message})`, data);
  }
  let read: ReturnType<typeof headerOfParsed>;
  try {
    read = headerOfParsed(parsed, url, size);
  } catch (err) {
    if (err instanceof GgufInvalid) throw missing("not_gguf", `${label}: not a GGUF: ${err.message}`, data);
    throw err;
  }
  const { header, dataEnd } = read;
  if (size < dataEnd)
    throw missing(
      "truncated",
      `${label}: the hub lists ${size} bytes but the header describes ${dataEnd}`,
      data,
    );
  return header;
}

/**
 * What @huggingface/gguf throws for bytes that are there but no GGUF's (a wild count, a value
 * type, an alignment), as against a header it could not read to its end: those were called
 * `truncated`, "could not be read to its end", as if a retry could help.
 */
const REFUSED_CONTENT =
  /not a valid gguf|general\.alignment|exceeds (maximum allowed|safe integer)|unsupported (value|array element|metadata) type/i;

function mergeParts(parts: GgufHeader[]): GgufHeader {
  const first = parts[0]!;
  return {
    ...first,
    files: parts.map((p) => p.path),
    size_bytes: parts.reduce((n, p) => n + p.size_bytes, 0),
    tensors: parts.flatMap((p) => p.tensors),
  };
}

const DEFAULT_RANGE: [number, number] = [0, 2 * 1024 * 1024 - 1];

/**
 * The fetch @huggingface/gguf reads through: its Range request goes out via hubFetch, and the
 * answer comes back as exactly the requested bytes, whatever the server did: a server that
 * ignores Range (200, the whole file) is read only as far as needed and then cut off, so
 * memory stays bounded; a range past the end (416) reads as no bytes.
 */
function rangedFetch(
  access: HubAccess,
  what: { repo: string; file: string },
  signal?: AbortSignal,
): typeof fetch {
  const ranged = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const url = typeof input === "string" ? input : input instanceof URL ? input.toString() : input.url;
    const asked = /bytes=(\d+)-(\d+)/.exec(new Headers(init?.headers).get("range") ?? "");
    const [start, end] = asked ? [Number(asked[1]), Number(asked[2])] : DEFAULT_RANGE;
    const res = await hubFetch(access, url, what, { headers: { Range: `bytes=${start}-${end}` }, signal });
    if (res.status === 416) {
      await res.body?.cancel();
      return new Response(new Uint8Array(0), { status: 206 });
    }
    // A proxy that blocks downloads (or a sign-in page) answers with its page: read as the
    // file's bytes it was "not a GGUF", the model blamed. No hub serves a GGUF as a web page.
    const type = (res.headers.get("content-type") ?? "").split(";")[0]!.trim().toLowerCase();
    if (type === "text/html" || type === "application/xhtml+xml") {
      await res.body?.cancel();
      throw missing(
        "hub_error",
        `${what.repo} ${what.file}: the server answered a web page (Content-Type: ${type}), not the file (a sign-in page or a proxy in the way?)`,
        what,
      );
    }
    const partial = res.status === 206;
    const bytes = await readSlice(res, partial ? sentFrom(res, start, what) : start, end - start + 1);
    const total = partial
      ? /\/\s*(\d+)\s*$/.exec(res.headers.get("content-range") ?? "")?.[1]
      : (res.headers.get("content-length") ?? undefined);
    const headers: Record<string, string> = {};
    if (total !== undefined && bytes.length > 0)
      headers["content-range"] = `bytes ${start}-${start + bytes.length - 1}/${total}`;
    return new Response(bytes, { status: 206, headers });
  };
  return ranged as typeof fetch;
}

/**
 * How far into a 206's body the asked `start` lies, by its Content-Range: a server may send
 * another range than asked, and read from the asked offset its bytes were taken for the header's
 * ("not a GGUF", the model blamed). One that starts after `start`, or ends before it (short of
 * the file's end: past it, no bytes is the answer), lacks them: the hub's error.
 */
function sentFrom(res: Response, start: number, what: { repo: string; file: string }): number {
  const range = res.headers.get("content-range");
  const sent = /^bytes (\d+)-(\d*)(?:\/(\d+))?/.exec(range ?? "");
  if (!sent) return 0;
  // An end left out is taken to reach the asked bytes; a total of `*` (NaN) excuses no end short of them.
  const [from, to, total] = [Number(sent[1]), sent[2] ? Number(sent[2]) : Infinity, Number(sent[3])];
  if (from <= start && (to >= start || start >= total)) return start - from;
  void res.body?.cancel();
  throw missing(
    "hub_error",
    `${what.repo} ${what.file}: asked for bytes from ${start}, the server sent ${range!.slice(0, 60)}`,
    what,
  );
}

/** `length` bytes of the body after skipping `skip`; stops reading (and cancels) once it has them. */
async function readSlice(res: Response, skip: number, length: number): Promise<Uint8Array> {
  const out = new Uint8Array(length);
  let filled = 0;
  let seen = 0;
  if (!res.body) return out.subarray(0, 0);
  const reader = res.body.getReader();
  try {
    while (filled < length) {
      const { done, value } = await reader.read();
      if (done) break;
      const from = Math.max(0, skip - seen);
      seen += value.length;
      if (from >= value.length) continue;
      const take = value.subarray(from, from + (length - filled));
      out.set(take, filled);
      filled += take.length;
    }
  } finally {
    await reader.cancel().catch(() => {});
  }
  return out.subarray(0, filled);
}
