import type { ToolCall } from "../protocol/chat-message.ts";

/**
 * One streamed fragment of a tool call (test/fixtures/llama-server/transcripts/14, 16:
 * `delta.tool_calls[]`).
 */
export interface ToolCallDelta {
  index: number;
  id?: string;
  type?: string;
  function?: { name?: string; arguments?: string };
}

/** Joins streamed tool-call fragments by `index`: the first carries id and name, the rest argument text. */
export class ToolCallAssembler {
  private readonly byIndex = new Map<number, { id: string; name: string; args: string }>();

  push(delta: ToolCallDelta): void {
    const index = typeof delta.index === "number" ? delta.index : 0;
    let call = this.byIndex.get(index);
    if (!call) {
      call = { id: "", name: "", args: "" };
      this.byIndex.set(index, call);
    }
    if (typeof delta.id === "string" && delta.id) call.id = delta.id;
    if (delta.function?.name) call.name += delta.function.name;
    if (delta.function?.arguments) call.args += delta.function.arguments;
  }

  calls(): ToolCall[] {
    return [...this.byIndex.entries()]
      .sort(([a], [b]) => a - b)
      .map(([index, c]) => ({
        id: c.id || `call_${index}`,
        type: "function" as const,
        function: { name: c.name, arguments: c.args },
      }));
  }
}
