import { CoreError, type ErrorReason } from "../protocol/errors.ts";
import { HubBadAnswer, HubError, HubUnreachable } from "./hub-client.ts";

/**
 * A pull's failures as CoreErrors that name the repo, the file and the cause. `data.cause` is
 * one word a host can switch on (docs/models.md lists them); `data.reason` adds the generic
 * chat failure kind where one fits, so a host that handles `connection_lost` once handles it
 * for pulls too.
 */
export const PULL_CAUSES = [
  "offline",
  "bad_endpoint",
  "not_found",
  "no_gguf",
  "ambiguous",
  "unauthorized",
  "forbidden",
  "hub_error",
  "connection_lost",
  "size_mismatch",
  "checksum_mismatch",
  "disk_full",
  "cache_unwritable",
  "bad_listing",
] as const;
export type PullCause = (typeof PULL_CAUSES)[number];

const USER_SIDE: ReadonlySet<PullCause> = new Set([
  "offline",
  "bad_endpoint",
  "not_found",
  "no_gguf",
  "ambiguous",
  "unauthorized",
  "forbidden",
]);

const REASONS: Partial<Record<PullCause, ErrorReason>> = {
  hub_error: "server_error",
  connection_lost: "connection_lost",
  size_mismatch: "bad_response",
  checksum_mismatch: "bad_response",
  bad_listing: "bad_response",
};

export interface PullWhere {
  repo: string;
  file?: string | undefined;
  revision?: string | undefined;
}

export function pullError(
  where: PullWhere,
  cause: PullCause,
  message: string,
  extra: Record<string, unknown> = {},
): CoreError {
  const reason = REASONS[cause];
  const subject = where.file ? `${where.repo}: ${where.file}` : where.repo;
  return new CoreError(
    USER_SIDE.has(cause) ? "invalid_request" : "internal_error",
    `${subject}: ${message}`,
    {
      repo: where.repo,
      ...(where.file ? { file: where.file } : {}),
      ...(where.revision ? { revision: where.revision } : {}),
      cause,
      ...(reason ? { reason } : {}),
      ...extra,
    },
  );
}

/** A hub answer or an unreachable hub as a pull error; anything else is returned unchanged. */
export function fromHub(err: unknown, where: PullWhere): unknown {
  if (err instanceof HubUnreachable)
    return pullError(where, "connection_lost", `cannot reach the hub (${err.causeText})`);
  if (err instanceof HubBadAnswer)
    return err.entry === undefined
      ? pullError(where, "hub_error", err.message, err.status ? { http_status: err.status } : {})
      : pullError(where, "bad_listing", `${err.message}; nothing was downloaded`, { entry: err.entry });
  if (!(err instanceof HubError)) return err;
  const said = err.serverMessage ? ` (the hub says: ${err.serverMessage})` : "";
  const status = { http_status: err.status, ...(err.hubCode ? { hub_code: err.hubCode } : {}) };
  switch (err.hubCode) {
    case "RepoNotFound":
      return pullError(
        where,
        err.status === 401 ? "unauthorized" : "not_found",
        err.status === 401
          ? `no such repo, or it is private or gated and needs a token (set HF_TOKEN)${said}`
          : `no such repo${said}`,
        status,
      );
    case "RevisionNotFound":
      return pullError(where, "not_found", `no revision ${where.revision ?? ""} in this repo${said}`, status);
    case "EntryNotFound":
      return pullError(where, "not_found", `no such file in this revision${said}`, status);
    case "GatedRepo":
      return err.status === 403
        ? pullError(
            where,
            "forbidden",
            `the repo is gated and this token has not been granted access${said}`,
            status,
          )
        : pullError(
            where,
            "unauthorized",
            `the repo is gated: accept its terms on the hub and set HF_TOKEN${said}`,
            status,
          );
  }
  if (err.status === 401)
    return pullError(
      where,
      "unauthorized",
      `the hub wants a token (set HF_TOKEN, or check it)${said}`,
      status,
    );
  if (err.status === 403)
    return pullError(where, "forbidden", `the token may not read this repo${said}`, status);
  if (err.status === 404) return pullError(where, "not_found", `not found on the hub${said}`, status);
  return pullError(where, "hub_error", `the hub answered HTTP ${err.status}${said}`, status);
}

/** A failed write: the disk filled up (the partial is kept for when there is room), or the cache cannot be written. */
export function writeFailure(err: unknown, where: PullWhere, path: string): unknown {
  const code = (err as NodeJS.ErrnoException).code;
  if (code === "ENOSPC" || code === "EDQUOT")
    return pullError(
      where,
      "disk_full",
      // Only a `.incomplete` is a partial; the ref, a snapshot's copy or a lock come after or before one.
      `the disk filled up while writing ${path} (${code}); ${path.endsWith(".incomplete") ? "the partial download is kept, " : ""}free some space and pull again`,
    );
  // A file past what its file system holds (FAT32: 4 GiB, a USB drive's usual format): resumed,
  // the partial failed at once again; "cannot write (EFBIG)" did not say the drive is the cause.
  if (code === "EFBIG")
    return pullError(
      where,
      "cache_unwritable",
      `the file system holding ${path} cannot hold a file this large (EFBIG; FAT32 holds at most 4 GiB); set HF_HUB_CACHE or HF_HOME to a folder on another drive${path.endsWith(".incomplete") ? ", and remove the partial download" : ""}`,
    );
  if (typeof code === "string") return pullError(where, "cache_unwritable", `cannot write ${path} (${code})`);
  return err;
}
