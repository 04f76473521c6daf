import { ReadBuffer, serializeMessage } from "@modelcontextprotocol/sdk/shared/stdio.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import type { McpChild } from "./child.ts";

/** How long output already in the pipe may still be read once the server exited. */
const DRAIN_AFTER_EXIT_MS = 200;

/**
 * The SDK's Transport over a server the pool spawned itself (child.ts), framed as the SDK's
 * StdioClientTransport frames it (its ReadBuffer: one JSON-RPC message a line). That transport
 * spawns on its own and could not hand the guard (guard.ts) its socket. The connection ends
 * when the server exits, not when stdout ends: a child of its own may hold stdout open.
 */
export class ChildTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;
  private readonly buffer = new ReadBuffer();
  private ended = false;

  constructor(private readonly child: McpChild) {}

  async start(): Promise<void> {
    const reading = this.read();
    void this.child.exited.then(async () => {
      await Promise.race([reading, Bun.sleep(DRAIN_AFTER_EXIT_MS)]);
      this.end();
    });
  }

  async send(message: JSONRPCMessage): Promise<void> {
    if (this.ended) throw new Error("Not connected");
    await this.child.write(serializeMessage(message));
  }

  async close(): Promise<void> {
    await this.child.stop();
    this.end();
  }

  private async read(): Promise<void> {
    try {
      for await (const chunk of this.child.stdout) {
        this.buffer.append(Buffer.from(chunk));
        this.deliver();
      }
    } catch (err) {
      // Over the buffer's limit, or a broken pipe: this connection is done.
      this.onerror?.(err as Error);
      void this.close();
    }
  }

  private deliver(): void {
    for (;;) {
      let message: JSONRPCMessage | null;
      try {
        message = this.buffer.readMessage();
      } catch (err) {
        this.onerror?.(err as Error); // one bad line, skipped
        continue;
      }
      if (message === null) return;
      if (!this.ended) this.onmessage?.(message);
    }
  }

  private end(): void {
    if (this.ended) return;
    this.ended = true;
    this.buffer.clear();
    this.onclose?.();
  }
}
