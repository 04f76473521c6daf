import { expect, test } from "bun:test";
import { AnswerFormat } from "../../../src/agent/turn/answer-format.ts";
import { ChatParamsSchema } from "../../../src/protocol/chat.ts";

// A chat's response_format schema was walked on the core's loop twice: by the params check, and
// again as its turn began (AnswerFormat: its text for the validator's thread, and whether its
// patterns are too long to have been read on the loop). A schema at the params' bounds (2,000
// objects, 256 KiB) costs each walk 5-25 ms on a loaded 2-core machine, ping and cancel waiting.
// The turn now takes what the params check found; this counts the reads of one of the schema's
// properties (a getter: every walk reads it).
test("a response_format schema the params checked is not walked again as its turn begins", () => {
  let reads = 0;
  const props: Record<string, unknown> = {};
  for (let i = 0; i < 50; i++) props[`p${i}`] = { type: "string", pattern: "^[a-z]+$" };
  Object.defineProperty(props, "watched", {
    enumerable: true,
    get: () => {
      reads++;
      return { type: "string" };
    },
  });
  const params = ChatParamsSchema.parse({
    session_id: "s",
    input: "hi",
    response_format: { type: "json_schema", schema: { type: "object", properties: props } },
  });
  expect(reads).toBeGreaterThan(0);
  const format = params.response_format;
  if (format?.type !== "json_schema") throw new Error("parsed without its schema");
  reads = 0;
  const answer = new AnswerFormat(format);
  expect(reads).toBe(0);
  // The text the validator's thread compiles is the schema's all the same.
  expect(JSON.parse((answer as unknown as { schema: string }).schema)).toEqual(
    JSON.parse(JSON.stringify(format.schema)),
  );
});
