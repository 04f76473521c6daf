import { z } from "zod";

/** `shutdown`: no params (any sent are dropped unread, as ping.ts says); it answers as ping does. */
export const ShutdownParamsSchema = z.object({});
