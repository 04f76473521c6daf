import { z } from "zod";

/** `shutdown`: no params; it answers `{status: "ok"}` as ping does (ping.ts). */
export const ShutdownParamsSchema = z.object({}).loose();
