import type { Config } from "../config/schema.ts";
import { methodTable } from "../methods/index.ts";
import { Dispatcher } from "../protocol/dispatcher.ts";
import { StdioTransport } from "../protocol/transport/stdio-transport.ts";
import type { Sink } from "../protocol/transport/writer.ts";
import { logger, logUnexpected } from "../util/logger.ts";
import { CoreServices } from "./services.ts";

export interface StdioServerOptions {
  configPath: string;
  cwd: string;
  input: ReadableStream<Uint8Array>;
  sink: Sink;
  /** Registers the process signals that trigger shutdown; returns an unregister function. */
  onSignal?: (handler: (signal: string) => void) => () => void;
  /**
   * Where a fault no code caught is heard (the process's `unhandledRejection` and
   * `uncaughtException`): `fatal` for a throw, which stops the core in order, its children first.
   */
  onFault?: (handler: (err: unknown, fatal: boolean) => void) => () => void;
  testMethods?: boolean;
}

/** Transport limits used before (or without) a config; the same as the schema's defaults. */
const DEFAULTS = { queueSize: 1024, drainTimeoutMs: 2000, maxLineBytes: 8 * 1024 * 1024 };

/**
 * The NDJSON loop: transport → dispatcher → transport. Resolves with the exit code once input
 * has ended (EOF, shutdown or a signal), in-flight work is cancelled, services are stopped and
 * queued output is drained.
 */
export async function runStdioServer(options: StdioServerOptions): Promise<number> {
  const services = new CoreServices({ configPath: options.configPath, cwd: options.cwd });
  const transport = new StdioTransport(options.input, options.sink, DEFAULTS);
  services.onConfig((config) =>
    transport.setLimits({
      queueSize: config.stdio.queue_size,
      drainTimeoutMs: config.stdio.drain_timeout_ms,
      maxLineBytes: config.stdio.max_line_bytes,
    }),
  );
  // The config loads just after start-up (or earlier, when a request needs it), so the first
  // initialize is answered before YAML and the schemas are even loaded.
  // Leftovers of a core that was killed outright are stopped at start-up, not at the first chat,
  // and however soon this core is told to exit (docs/supervisor.md): one reap, begun by whichever
  // comes first.
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

  let stopping: Promise<void> | undefined;
  const stop = (why: string): Promise<void> => {
    stopping ??= (async () => {
      logger.debug(`stopping: ${why}`);
      // Input is still read while in-flight work winds down, so a request that arrives now is
      // answered (`cancelled`: the core is shutting down) rather than left without a word.
      await dispatcher.stopAll();
      await services.stop();
      await reap();
      transport.stopReading();
    })();
    return stopping;
  };
  const methods = methodTable(services, { testMethods: options.testMethods ?? false });
  const dispatcher = new Dispatcher(methods, transport, () => stop("shutdown request"));

  const unregister = options.onSignal?.((signal) => void stop(`signal ${signal}`));
  // Without a listener either fault ends the process at once, leaving llama-server and the MCP
  // servers running and every chat in flight unanswered. A promise rejected with no one to hear
  // it is logged and the core serves on; a throw no code caught may have left any state half
  // done, so the core stops as on a signal and exits 1.
  let faulted = false;
  const unfault = options.onFault?.((err, fatal) => {
    logUnexpected(fatal ? "uncaught exception; stopping" : "a promise rejected with no handler", err);
    if (!fatal) return;
    faulted = true;
    void stop("an uncaught exception");
  });
  await transport.listen((line) => dispatcher.handleLine(line));
  await stop("end of input");
  // The shutdown requests themselves answer once the rest has stopped.
  await dispatcher.settled();
  await transport.drain();
  unregister?.();
  unfault?.();
  clearTimeout(preload);
  return faulted ? 1 : 0;
}
