/**
 * Methods a `cancel` stops only when it names their id: a host's search-as-you-type beside a
 * streaming reply, or an unload waiting on a dead drive's answer, made the one chat's implicit
 * cancel ambiguous. Plain values, zod-free: the core's `implicitCandidates` and the client's
 * id-less `cancel()` read this one list.
 */
export const BY_ID_ONLY: ReadonlySet<string> = new Set(["sessions.search", "models.unload"]);
