import { buildRegistry } from "../methods/index.ts";
import { Dispatcher } from "../protocol/dispatcher.ts";
import { LineSplitter } from "../protocol/framing.ts";
import { type Sink, Writer } from "../protocol/writer.ts";
import { logger, logUnexpected } from "../util/logger.ts";
import { Core } from "./core.ts";

export interface StdioServerOptions {
  configPath: string;
  cwd: string;
  input: ReadableStream<Uint8Array>;
  sink: Sink;
  /** Registers the process signals that trigger shutdown; returns an unregister function. */
  onSignal?: (handler: (signal: string) => void) => () => void;
  testMethods?: boolean;
}

/** Writer and framing limits used before (or without) a config; the same as the schema's defaults. */
const DEFAULTS = { queueSize: 1024, drainTimeoutMs: 2000, maxLineBytes: 8 * 1024 * 1024 };

/**
 * The NDJSON loop: reader → dispatcher → writer. Resolves with the exit code once input has
 * ended (EOF, shutdown or a signal), in-flight work is cancelled, services are stopped and
 * queued output is drained.
 */
export async function runStdioServer(options: StdioServerOptions): Promise<number> {
  const core = new Core({ configPath: options.configPath, cwd: options.cwd });
  const limits = { ...DEFAULTS };
  const writer = new Writer(options.sink, { queueSize: limits.queueSize });
  const splitter = new LineSplitter(limits.maxLineBytes);
  core.onConfig(({ config }) => {
    limits.queueSize = config.stdio.queue_size;
    limits.drainTimeoutMs = config.stdio.drain_timeout_ms;
    limits.maxLineBytes = config.stdio.max_line_bytes;
    writer.setQueueSize(limits.queueSize);
    splitter.maxLineBytes = limits.maxLineBytes;
  });
  // The config loads just after start-up (or earlier, when a request needs it), so the first
  // initialize is answered before YAML and the schemas are even loaded.
  const preload = setTimeout(() => {
    try {
      core.config();
    } catch {
      return; // Reported to the first method that needs the config.
    }
    // A llama-server left behind by a core that was killed outright is stopped now, not at
    // the first chat (SPEC §3).
    void import("../runtime/provider.ts").then((m) => m.reapAtStartup(core));
  }, 25);

  const reader = options.input.getReader();
  let stopping: Promise<void> | undefined;
  const stop = (why: string, shutdownId?: string | number): Promise<void> => {
    stopping ??= (async () => {
      logger.debug(`stopping: ${why}`);
      // Stop taking input first, so nothing new starts while in-flight work winds down.
      reader.cancel().catch(() => {});
      // The shutdown request itself is spared: it answers once the rest has stopped.
      await dispatcher.stopAll(shutdownId);
      await core.stop();
    })();
    return stopping;
  };
  const registry = buildRegistry({ testMethods: options.testMethods ?? false });
  const dispatcher = new Dispatcher(registry, writer, core, (id) => stop("shutdown request", id));

  const unregister = options.onSignal?.((signal) => void stop(`signal ${signal}`));
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      for (const frame of splitter.push(value)) dispatcher.handleFrame(frame, limits.maxLineBytes);
      if (stopping) break;
    }
    if (!stopping) for (const frame of splitter.end()) dispatcher.handleFrame(frame, limits.maxLineBytes);
  } catch (err) {
    if (!stopping) logUnexpected("reading stdin failed", err);
  }
  await stop("end of input");
  // Let any request still finishing (the shutdown answer itself) reach the queue.
  while (dispatcher.activeCount > 0) await dispatcher.stopAll();
  const drained = await writer.drain(limits.drainTimeoutMs);
  if (!drained) logger.warn(`output not fully drained within ${limits.drainTimeoutMs} ms`);
  unregister?.();
  clearTimeout(preload);
  return 0;
}
