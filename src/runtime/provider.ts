import { planLaunch } from "../plan/launch.ts";
import type { Core } from "../server/core.ts";
import type { LlamaProvider } from "./endpoint.ts";
import { findLlamaServer } from "./find-binary.ts";
import { Supervisor } from "./supervisor.ts";

/** The core's one supervisor, created on first use and stopped by Core.stop() at shutdown. */
export function llamaProvider(core: Core): LlamaProvider {
  return core.service("llama", createSupervisor, (s) => s.stop());
}

export function createSupervisor(core: Core): Supervisor {
  const llama = () => core.config().config.llama;
  return new Supervisor({
    findBinary: () => findLlamaServer(core.config().config),
    plan: () => planLaunch(core),
    dataDir: () => core.config().config.app.data_dir,
    settings: () => {
      const l = llama();
      return {
        startupTimeoutMs: l.startup_timeout_s * 1000,
        stopGraceMs: l.stop_grace_s * 1000,
        maxRestarts: l.max_restarts,
        restartWindowMs: l.restart_window_s * 1000,
        restartBackoffMs: l.restart_backoff_ms,
        requestTimeoutMs: l.request_timeout_s * 1000,
        logMaxBytes: l.log_max_bytes,
        logFiles: l.log_files,
      };
    },
    fallbackSlots: () => {
      try {
        const p = llama().parallel;
        return typeof p === "number" ? p : 1;
      } catch {
        return 1;
      }
    },
  });
}
