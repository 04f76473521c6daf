import { describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import type { LlamaProvider } from "../../src/runtime/endpoint.ts";
import { CoreServices } from "../../src/server/services.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

function stubLlama(slots: number, stopped: string[]): LlamaProvider {
  return {
    acquire: () => Promise.reject(new Error("not in this test")),
    slots: () => slots,
    stop: async () => {
      stopped.push("llama");
    },
  };
}

describe("the composition root", () => {
  test("services are created on first use and stopped once, in reverse order of creation", async () => {
    using dir = tmpdir();
    writeFileSync(join(dir.path, "config.yaml"), "llama:\n  parallel: 3\n");
    const stopped: string[] = [];
    let made = 0;
    const services = new CoreServices({
      configPath: "config.yaml",
      cwd: dir.path,
      llama: () => {
        made++;
        return stubLlama(2, stopped);
      },
    });
    // Before the supervisor exists, the config's explicit slot count; then the supervisor's.
    expect(services.parallelChats()).toBe(3);
    const pool = services.mcp();
    const close = pool.close.bind(pool);
    pool.close = async () => {
      stopped.push("mcp");
      await close();
    };
    expect(services.llama()).toBe(services.llama());
    expect(made).toBe(1);
    expect(services.parallelChats()).toBe(2);
    expect(services.sessionLocks()).toBe(services.sessionLocks());
    await Promise.all([services.stop(), services.stop()]);
    expect(stopped).toEqual(["llama", "mcp"]);
  });

  test("without a config: parallelChats is one and config() names the problem", () => {
    using dir = tmpdir();
    const services = new CoreServices({ configPath: "none.yaml", cwd: dir.path });
    expect(services.parallelChats()).toBe(1);
    expect(() => services.config()).toThrow(/no config file/);
    expect(services.defaultConfig().file).toBeNull();
  });
});
