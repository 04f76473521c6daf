import { describe, expect, test } from "bun:test";
import { parseConfigText } from "../../src/config/load.ts";
import { coreErrorOf } from "../fixtures/core-error.ts";

const parse = (yaml: string) => parseConfigText(yaml, "/c/config.yaml");
const rpcOf = (entries: string) => parse(`llama:\n  rpc: ${entries}\n`);

describe("llama.rpc", () => {
  test("defaults to no workers", () => {
    expect(parse("").config.llama.rpc).toEqual([]);
  });

  test("strings and {endpoint, memory_bytes} both become the object form, host in lower case", () => {
    const { config, warnings } = rpcOf(
      `["127.0.0.1:50052", {endpoint: "Box.lan:50053", memory_bytes: 17179869184}]`,
    );
    expect(warnings).toEqual([]);
    expect(config.llama.rpc).toEqual([
      { endpoint: "127.0.0.1:50052", host: "127.0.0.1", port: 50052, memory_bytes: null },
      { endpoint: "box.lan:50053", host: "box.lan", port: 50053, memory_bytes: 17179869184 },
    ]);
  });

  test("at most 64 workers: thousands were each asked at once, at every start", () => {
    // 43,000 entries fit the 1 MiB a config may be: each plan, doctor and start opened a socket
    // to every one at once (past the open-file limit, which the core's own files then met) and
    // doctor's answer grew to tens of MB. llama-server takes 15 devices in all.
    const list = (n: number) =>
      JSON.stringify(Array.from({ length: n }, (_, i) => `10.0.${i >> 8}.${i & 255}:50052`));
    expect(rpcOf(list(64)).config.llama.rpc).toHaveLength(64);
    const err = coreErrorOf(() => rpcOf(list(3000)));
    expect(err).toMatchObject({ code: "config_invalid", data: { key: "llama.rpc" } });
    expect(err.message).toContain("3000 workers listed, at most 64");
  });

  test("the block form of YAML works too", () => {
    const { config } = parse(
      "llama:\n  rpc:\n    - 10.0.0.2:50052\n    - endpoint: 10.0.0.3:50052\n      memory_bytes: null\n",
    );
    expect(config.llama.rpc.map((w) => [w.endpoint, w.memory_bytes])).toEqual([
      ["10.0.0.2:50052", null],
      ["10.0.0.3:50052", null],
    ]);
  });

  // Bad input: each is config_invalid naming the entry (llama.rpc.<i>) and what is wrong with it.
  const bad: [string, string, RegExp][] = [
    [`["127.0.0.1:50052", "nope"]`, "llama.rpc.1", /'nope' is not host:port: the port is missing/],
    [`["a:1", "A:1"]`, "llama.rpc.1", /'A:1' is listed twice \(entries 0 and 1\)/],
    [`["a:1", {endpoint: "a:1"}]`, "llama.rpc.1", /listed twice/],
    [`["[::1]:50052"]`, "llama.rpc.0", /IPv6/],
    [`["a:1,b:2"]`, "llama.rpc.0", /comma/],
    [`["host:99999"]`, "llama.rpc.0", /outside 1-65535/],
    [`["host:0"]`, "llama.rpc.0", /outside 1-65535/],
    [`[""]`, "llama.rpc.0", /empty/],
    [
      `[5]`,
      "llama.rpc.0",
      /expected "host:port" or \{endpoint: "host:port", memory_bytes: N\}, got number 5/,
    ],
    [`[null]`, "llama.rpc.0", /expected "host:port" or .*, got null/],
    [`[["a:1"]]`, "llama.rpc.0", /got a list/],
    [`[{endpoint: "a:1", extra: 2}]`, "llama.rpc.0", /unknown key 'extra'/],
    [`[{memory_bytes: 5}]`, "llama.rpc.0.endpoint", /missing or not a string/],
    [`[{endpoint: 7}]`, "llama.rpc.0.endpoint", /missing or not a string/],
    [`[{endpoint: "a:1", memory_bytes: -5}]`, "llama.rpc.0.memory_bytes", /above 0, got -5/],
    [`[{endpoint: "a:1", memory_bytes: 1.5}]`, "llama.rpc.0.memory_bytes", /whole number/],
    [`[{endpoint: "a:1", memory_bytes: "16G"}]`, "llama.rpc.0.memory_bytes", /got "16G"/],
    [`"a:1,b:2"`, "llama.rpc", /expected array, got string/],
  ];
  test.each(bad)("%s → config_invalid at %s", (entries, key, message) => {
    const err = coreErrorOf(() => rpcOf(entries));
    expect(err.code).toBe("config_invalid");
    expect(err.data!.key).toBe(key);
    expect(err.message).toContain(`${key}:`);
    expect(err.message).toMatch(message);
    expect(err.message).toMatch(/^\/c\/config\.yaml:2: /);
  });
});

describe("an RPC worker written with a user or password", () => {
  // llama.cpp's RPC has no login: a worker written `user:password@host:port` (as ssh or a URL
  // takes one) was refused quoting it whole, under the wrong reason ("IPv6 addresses…"), in the
  // error every request needing the config answers and in doctor's report.
  test.each([
    [`["admin:pw-Zq81secret@box.lan:50052"]`],
    [`["tcp://admin:pw-Zq81secret@box.lan:50052"]`],
    [`["pw-Zq81secret@box.lan:50052"]`],
    [`[{endpoint: "admin:pw-Zq81secret@box.lan:50052"}]`],
  ])("%s: refused saying so, the credentials not quoted", (entries) => {
    const err = coreErrorOf(() => rpcOf(entries));
    expect(err).toMatchObject({ code: "config_invalid", data: { key: "llama.rpc.0" } });
    expect(err.message).toContain("box.lan:50052");
    expect(err.message).not.toContain("IPv6");
    expect(JSON.stringify({ message: err.message, data: err.data })).not.toContain("Zq81secret");
  });

  // One worker written without the list's brackets: refused as not a list, and zod's 'got
  // string "admin:pw…"' quoted the credentials the list entry's check hides.
  test.each([[`"admin:pw-Zq81secret@box.lan:50052"`], [`tcp://admin:pw-Zq81secret@box.lan:50052`]])(
    "%s not in a list: refused as not a list, the credentials not quoted",
    (entry) => {
      const err = coreErrorOf(() => rpcOf(entry));
      expect(err).toMatchObject({ code: "config_invalid", data: { key: "llama.rpc" } });
      expect(err.message).toMatch(/llama.rpc: expected array, got string "(tcp:\/\/)?…@box.lan:50052"/);
      expect(JSON.stringify({ message: err.message, data: err.data })).not.toContain("Zq81secret");
    },
  );
});
