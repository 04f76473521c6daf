import { SlotError } from "../../llama/errors.ts";
import { logger } from "../../util/logger.ts";
import type { KvDisk } from "./kv-disk.ts";

/**
 * Prompt reuse's KV folder (reuse.ts; docs/agent.md#prompt-reuse): swept of what saves cut short
 * left before its first use, and off for a server that refused slot actions (501) until a new one.
 */
export class DiskUse {
  /** Why nothing goes to disk for the current server (it refused slot actions: 501). */
  off: string | undefined;
  private swept = false;

  constructor(private readonly disk: KvDisk | null) {}

  /** The folder, once per core, before its first use: what saves cut short left is removed. */
  usable(): KvDisk | null {
    const disk = this.disk;
    if (disk && !this.swept) {
      this.swept = true;
      try {
        disk.sweep();
      } catch (err) {
        logger.warn(`the KV state folder ${disk.dir} cannot be used: ${(err as Error).message}`);
      }
    }
    return disk;
  }

  /** A slot action failed: logged; a server without a slot folder is asked no more. */
  failed(err: unknown, what: string): void {
    if (err instanceof SlotError && err.kind === "not_supported") {
      this.off = err.message;
      logger.info(`${what}: ${err.message}; KV state is not saved for this llama-server`);
      return;
    }
    logger.warn(`${what} failed (the prompt is processed instead): ${(err as Error).message}`);
  }
}
