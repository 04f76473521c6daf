import { expect, test } from "bun:test";
import type {
  AnyLocalAiError,
  ProjectorProblem as ClientProjectorProblem,
  PullCause as ClientPullCause,
  ErrorDataByCode,
} from "../../src/client/index.ts";
import type { HubProblem } from "../../src/models/hub-listing.ts";
import type { PullCause } from "../../src/models/pull-errors.ts";
import type { CacheProblem } from "../../src/models/resolve.ts";
import type { ModelProblem } from "../../src/plan/gguf-read.ts";
import type { ProjectorProblem } from "../../src/plan/projector.ts";

// Checked by tsc (`npm run check`), not at run time: each field the core puts in an error's data
// (docs/protocol.md#errors) reads as its type in a host's `switch (err.code)`. Every shape is open
// (`[field: string]: unknown`), so a field the client's types lacked read as `unknown` and the
// assignments below failed to compile: a delete's KV states left (`files`, `files_count`,
// `folder`), the data folder's `key`/`problem`/`cause`, a pull's `cause`, a projector's `problem`.
type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;

// The closed unions a host switches on are the core's own, so they cannot lag it again.
const pullCauses: Equal<ClientPullCause, PullCause> = true;
const projectorProblems: Equal<ClientProjectorProblem, ProjectorProblem> = true;
const modelProblems: Equal<
  NonNullable<ErrorDataByCode["model_missing"]["problem"]>,
  ModelProblem | CacheProblem | HubProblem | "ambiguous"
> = true;

export function hostReads(err: AnyLocalAiError): unknown[] {
  switch (err.code) {
    case "internal_error": {
      const files: string[] | undefined = err.data?.files;
      const count: number | undefined = err.data?.files_count;
      const folder: string | undefined = err.data?.folder;
      const key: string | undefined = err.data?.key;
      const problem: string | undefined = err.data?.problem;
      const cause: string | undefined = err.data?.cause;
      const path: string | undefined = err.data?.path;
      const retry: number | undefined = err.data?.retry_in_ms;
      return [files, count, folder, key, problem, cause, path, retry, err.data?.repo];
    }
    case "cancelled": {
      // A cancelled add whose KV states or document could not be erased: the id to delete it with.
      const files: string[] | undefined = err.data?.files;
      const id: string | undefined = err.data?.document_id;
      const problem: string | undefined = err.data?.problem;
      return [files, id, problem];
    }
    case "invalid_request": {
      const problem: string | undefined = err.data?.problem;
      const cause: PullCause | undefined = err.data?.cause;
      const available: string[] | undefined = err.data?.available;
      const key: string | undefined = err.data?.key;
      return [problem, cause, available, key];
    }
    case "model_plan_error": {
      const problem: ProjectorProblem | undefined = err.data?.problem;
      const holders: string[] | undefined = err.data?.holders;
      const over: number | undefined = err.data?.devices?.[0]?.budget_bytes;
      // model.gpu_layers set with no usable GPU: how many the vendor tools found; a forced KV
      // cache type the model's head size refuses: the type, its block and the head size.
      const gpus: number | undefined = err.data?.gpus;
      const cacheType: string | undefined = err.data?.cache_type;
      const block: number | undefined = err.data?.block_size;
      const head: number | undefined = err.data?.head_size;
      return [problem, holders, over, gpus, cacheType, block, head];
    }
    case "model_missing": {
      const hub: string | null | undefined = err.data?.hub_problem;
      const repo: string | undefined = err.data?.repo;
      return [hub, repo, err.data?.problem === "hub_offline"];
    }
    default:
      return [];
  }
}

test("the client's error data types are checked by tsc", () => {
  expect([pullCauses, projectorProblems, modelProblems]).toEqual([true, true, true]);
});
