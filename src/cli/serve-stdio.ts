import { defineCommand } from "citty";
import { stdoutSink } from "../protocol/writer.ts";
import { runStdioServer } from "../server/stdio-server.ts";
import { configArg } from "./args.ts";

export default defineCommand({
  meta: { name: "serve-stdio", description: "Serve the NDJSON protocol on stdin/stdout" },
  args: { ...configArg },
  run: async ({ args }) =>
    runStdioServer({
      configPath: args.config,
      cwd: process.cwd(),
      input: Bun.stdin.stream(),
      sink: stdoutSink(),
      testMethods: process.env.LOCAL_AI_TEST_METHODS === "1",
      onSignal: (handler) => {
        const signals = ["SIGINT", "SIGTERM", "SIGHUP"] as const;
        const listeners = signals.map((s) => {
          const l = () => handler(s);
          process.on(s, l);
          return [s, l] as const;
        });
        return () => {
          for (const [s, l] of listeners) process.off(s, l);
        };
      },
    }),
});
