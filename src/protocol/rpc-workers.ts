import { z } from "zod";
import { once } from "../util/once.ts";

/**
 * What the protocol says of llama.cpp RPC workers (llama.rpc, docs/distributed.md), in `status` and
 * in the plan report. Plain lists, so the worker query (src/rpc/wire.ts) builds no schema.
 */

/** Every way the worker query can fail (src/rpc/wire.ts); the plan lists them too. */
export const RPC_WORKER_FAILURES = [
  "refused",
  "unresolved",
  "unreachable",
  "timeout",
  "closed",
  "wrong_version",
  "malformed",
] as const;

export const RPC_WORKER_STATES = [
  /** Never asked yet. */
  "unchecked",
  /** Answered the last query. */
  "ok",
  /** The running llama-server uses it. */
  "in_use",
  /** It stopped answering while llama-server used it (or was skipped at its start). */
  "lost",
  ...RPC_WORKER_FAILURES,
] as const;

/**
 * An RPC worker as status reports it: what this process last learned of it
 * (src/rpc/workers.ts), never a network call on status's path. Built on first ask, with the
 * rest of status's result (status.ts).
 */
export const rpcWorkerStatusSchema = once(() =>
  z.strictObject({
    endpoint: z.string(),
    state: z.enum(RPC_WORKER_STATES),
    /** One line: what it has, or why it cannot be used. */
    message: z.string(),
    /** Its RPC protocol version, once it answered HELLO. */
    version: z.string().nullable(),
    devices: z.array(
      z.strictObject({ free_bytes: z.number().nonnegative(), total_bytes: z.number().nonnegative() }),
    ),
    /** When it was last asked (ms since the epoch), or null. */
    checked_at: z.number().nullable(),
  }),
);
export type RpcWorkerStatus = z.infer<ReturnType<typeof rpcWorkerStatusSchema>>;
