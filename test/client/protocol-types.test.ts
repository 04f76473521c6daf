import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import type { z } from "zod";
import { clientTypesText, OUTPUT } from "../../scripts/client-types.ts";
import { CHAT_EVENT_NAMES } from "../../src/client/chat-events.ts";
import type * as P from "../../src/client/protocol-types.ts";
import type { CancelResult } from "../../src/protocol/cancel.ts";
import type { ChatParamsSchema, ChatResultSchema, WarningSchema } from "../../src/protocol/chat.ts";
import { ChatEventFields } from "../../src/protocol/chat.ts";
import type { DoctorResult } from "../../src/protocol/doctor.ts";
import type { InitializeParamsSchema, InitializeResult } from "../../src/protocol/initialize.ts";
import type { ErrorCodeSchema, ErrorReasonSchema, RequestIdSchema } from "../../src/protocol/messages.ts";
import type { ModelsResult } from "../../src/protocol/models.ts";
import type {
  ModelsLoadEventFields,
  ModelsLoadParamsSchema,
  ModelsLoadResultSchema,
} from "../../src/protocol/models-load.ts";
import type { ModelsUnloadParamsSchema, ModelsUnloadResultSchema } from "../../src/protocol/models-unload.ts";
import type { StatusResult } from "../../src/protocol/ping.ts";
import type { PlanParamsSchema, PlanReport } from "../../src/protocol/plan.ts";
import type { PullParamsSchema, PullResultSchema } from "../../src/protocol/pull.ts";
import type { WarmupParamsSchema, WarmupResultSchema } from "../../src/protocol/warmup.ts";
import type { WarmupProgressFields } from "../../src/protocol/warmup-progress.ts";

// The client's plain types must be the zod types, exactly: `tsc --noEmit` fails on a mismatch.
type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
function same<A, B>(ok: Equal<A, B>): Equal<A, B> {
  return ok;
}
type Fields = typeof ChatEventFields;
// biome-ignore lint/complexity/noBannedTypes: the same empty-fields rule as scripts/client-types.ts
type NoFields = {};
type ZodChatEvent = {
  [K in keyof Fields]: {
    id: z.infer<typeof RequestIdSchema>;
    type: "event";
    event: K;
  } & (string extends keyof z.infer<Fields[K]> ? NoFields : z.infer<Fields[K]>);
}[keyof Fields];

describe("client protocol types", () => {
  test("equal the zod-inferred types", () => {
    const checks = [
      same<P.RequestId, z.infer<typeof RequestIdSchema>>(true),
      same<P.ErrorCode, z.infer<typeof ErrorCodeSchema>>(true),
      same<P.ChatParams, z.input<typeof ChatParamsSchema>>(true),
      same<P.ChatResult, z.infer<typeof ChatResultSchema>>(true),
      same<P.Warning, z.infer<typeof WarningSchema>>(true),
      same<P.ChatEventName, keyof Fields>(true),
      same<P.ChatEvent, ZodChatEvent>(true),
      same<P.InitializeParams, z.input<typeof InitializeParamsSchema>>(true),
      same<P.InitializeResult, InitializeResult>(true),
      same<P.StatusResult, StatusResult>(true),
      same<P.CancelResult, CancelResult>(true),
      same<P.DoctorResult, DoctorResult>(true),
      same<P.PlanResult, PlanReport>(true),
      same<P.ModelsResult, ModelsResult>(true),
      same<P.PlanParams, z.input<typeof PlanParamsSchema>>(true),
      same<P.ModelsLoadParams, z.input<typeof ModelsLoadParamsSchema>>(true),
      same<P.ModelsLoadResult, z.infer<typeof ModelsLoadResultSchema>>(true),
      same<P.ModelsLoadEvent, P.WarmupEvent>(true),
      same<(typeof ModelsLoadEventFields)["warmup_progress"], typeof WarmupProgressFields>(true),
      same<P.ModelsUnloadParams, z.input<typeof ModelsUnloadParamsSchema>>(true),
      same<P.ModelsUnloadResult, z.infer<typeof ModelsUnloadResultSchema>>(true),
      same<P.PullParams, z.input<typeof PullParamsSchema>>(true),
      same<P.PullResult, z.infer<typeof PullResultSchema>>(true),
      same<P.ErrorReason, z.infer<typeof ErrorReasonSchema>>(true),
      same<P.WarmupParams, z.input<typeof WarmupParamsSchema>>(true),
      same<P.WarmupResult, z.infer<typeof WarmupResultSchema>>(true),
      same<
        P.WarmupEvent,
        { id: z.infer<typeof RequestIdSchema>; type: "event"; event: "warmup_progress" } & z.infer<
          typeof WarmupProgressFields
        >
      >(true),
    ];
    expect(checks.every(Boolean)).toBe(true);
  });

  test("the client's runtime list of chat events matches the protocol's", () => {
    expect([...CHAT_EVENT_NAMES]).toEqual(
      Object.keys(ChatEventFields) as typeof CHAT_EVENT_NAMES extends readonly (infer N)[] ? N[] : never,
    );
  });

  test("the committed src/client/protocol-types.ts is current (run `bun run build:client`)", () => {
    expect(readFileSync(OUTPUT, "utf8")).toBe(clientTypesText());
  });
});
