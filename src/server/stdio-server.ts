import type { Config } from "../config/schema.ts";
import { methodTable } from "../methods/index.ts";
import { Dispatcher } from "../protocol/dispatcher.ts";
import { LineSplitter } from "../protocol/framing.ts";
import { type Sink, Writer } from "../protocol/writer.ts";
import { logger, logUnexpected } from "../util/logger.ts";
import { CoreServices } from "./services.ts";

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
  const services = new CoreServices({ configPath: options.configPath, cwd: options.cwd });
  const limits = { ...DEFAULTS };
  const writer = new Writer(options.sink, { queueSize: limits.queueSize });
  const splitter = new LineSplitter(limits.maxLineBytes);
  services.onConfig((config) => {
    limits.queueSize = config.stdio.queue_size;
    limits.drainTimeoutMs = config.stdio.drain_timeout_ms;
    limits.maxLineBytes = config.stdio.max_line_bytes;
    writer.setQueueSize(limits.queueSize);
    splitter.maxLineBytes = limits.maxLineBytes;
  });
  // The config loads just after start-up (or earlier, when a request needs it), so the first
  // initialize is answered before YAML and the schemas are even loaded.
  // Leftovers of a core that was killed outright are stopped at start-up, not at the first chat,
  // and however soon this core is told to exit (SPEC §3): one reap, begun by whichever comes first.
  let reaping: Promise<void> | undefined;
  const reap = (): Promise<void> => {
    let config: Config;
    try {
      config = services.config();
    } catch {
      return Promise.resolve(); // Reported to the first method that needs the config.
    }
    reaping ??= import("../runtime/reap-at-startup.ts").then((m) => m.reapAtStartup(config));
    return reaping;
  };
  const preload = setTimeout(() => void reap(), 25);

  const reader = options.input.getReader();
  let stopping: Promise<void> | undefined;
  const stop = (why: string): Promise<void> => {
    stopping ??= (async () => {
      logger.debug(`stopping: ${why}`);
      // Input is still read while in-flight work winds down, so a request that arrives now is
      // answered (`cancelled`: the core is shutting down) rather than left without a word.
      await dispatcher.stopAll();
      await services.stop();
      await reap();
      reader.cancel().catch(() => {});
    })();
    return stopping;
  };
  const methods = methodTable(services, { testMethods: options.testMethods ?? false });
  const dispatcher = new Dispatcher(methods, writer, () => stop("shutdown request"));

  const unregister = options.onSignal?.((signal) => void stop(`signal ${signal}`));
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      for (const frame of splitter.push(value)) dispatcher.handleFrame(frame, limits.maxLineBytes);
    }
    // A last line without its newline still counts at end of input.
    if (!stopping) for (const frame of splitter.end()) dispatcher.handleFrame(frame, limits.maxLineBytes);
  } catch (err) {
    if (!stopping) logUnexpected("reading stdin failed", err);
  }
  await stop("end of input");
  // The shutdown requests themselves answer once the rest has stopped.
  await dispatcher.settled();
  const drained = await writer.drain(limits.drainTimeoutMs);
  if (!drained) logger.warn(`output not fully drained within ${limits.drainTimeoutMs} ms`);
  unregister?.();
  clearTimeout(preload);
  return 0;
}
