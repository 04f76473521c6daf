import { z } from "zod";

/**
 * Where an answer came from (docs/protocol.md "Citations"): one recalled passage each, as
 * `memory_done`, the chat result and `sessions.get` show them. `id` is the session's id (a
 * past turn), the document's id, or the file's path (a `memory.folders` passage); `name` the
 * session's title, the document's name or the file's name; `chunk` the turn's first message
 * seq, else the chunk's number from 0; `score` the rank's (higher is better).
 */
export const SourceSchema = z.object({
  kind: z.enum(["turn", "document", "folder"]),
  id: z.string(),
  name: z.string(),
  chunk: z.number().int().nonnegative(),
  score: z.number(),
});
export type Source = z.infer<typeof SourceSchema>;
