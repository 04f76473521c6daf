import { afterEach, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { KvDisk } from "../../src/agent/kv/kv-disk.ts";
import {
  type ErrorDataByCode,
  LocalAiClient,
  LocalAiError,
  type LocalAiErrorCode,
} from "../../src/client/index.ts";
import { MAX_IN_FLIGHT } from "../../src/protocol/method-table.ts";
import { canMakeImmutable, makeImmutable, undoImmutable } from "../fixtures/full-disk.ts";
import { writeFakeModel } from "../fixtures/llama-stand-in/binary.ts";
import { writeStack } from "../fixtures/stack.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { hostBinary } from "./host-binary.ts";

// The compiled core driven into each error whose data the client types (ErrorDataByCode): the
// data it really sends must fit the declared shape, field by field.
type Kind = "string" | "number" | "null" | "array" | "boolean";
type Shape = Record<string, { kinds: Kind[]; required: boolean }>;

const kindOf = (v: unknown): Kind =>
  v === null ? "null" : Array.isArray(v) ? "array" : (typeof v as "string" | "number" | "boolean");

/** `field: "string|null"` required, `field?: "number"` optional. */
function shape(spec: Record<string, string>): Shape {
  return Object.fromEntries(
    Object.entries(spec).map(([k, v]) => [
      k.replace("?", ""),
      { kinds: v.split("|") as Kind[], required: !k.endsWith("?") },
    ]),
  );
}

function expectData<C extends LocalAiErrorCode>(err: LocalAiError, code: C, spec: Shape): ErrorDataByCode[C] {
  expect(err.code).toBe(code);
  const data = err.data as Record<string, unknown>;
  expect(typeof data).toBe("object");
  for (const [field, { kinds, required }] of Object.entries(spec)) {
    if (!(field in data)) {
      expect(`${field} missing`).toBe(required ? `${field} present` : `${field} missing`);
      continue;
    }
    expect(`${field}: ${kinds.includes(kindOf(data[field])) ? "fits" : kindOf(data[field])}`).toBe(
      `${field}: fits`,
    );
  }
  return data as ErrorDataByCode[C];
}

/**
 * The config replaced whole: the core reads it ahead after initialize (services.ts), and a read
 * between a plain write's truncation and its bytes finds an empty file, a valid config it keeps.
 */
function writeConfig(dir: string, text: string): void {
  writeFileSync(join(dir, "config.yaml.new"), text);
  renameSync(join(dir, "config.yaml.new"), join(dir, "config.yaml"));
}

const clients: LocalAiClient[] = [];
afterEach(() => {
  // Here, not only in the test's finally: a test that timed out never reaches its finally.
  undoImmutable();
  for (const c of clients.splice(0)) c.kill();
});

async function client(cwd: string): Promise<LocalAiClient> {
  const c = await LocalAiClient.start({ binary: hostBinary(), cwd });
  clients.push(c);
  return c;
}

async function failure(p: Promise<unknown>): Promise<LocalAiError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(LocalAiError);
  return err as LocalAiError;
}

describe("error data from the compiled core fits ErrorDataByCode", () => {
  test("config_missing, config_invalid (schema and YAML), model_missing, model_plan_error", async () => {
    await using dir = tmpdir();
    const c = await client(dir.path);
    expectData(await failure(c.plan()), "config_missing", shape({ file: "string" }));

    writeConfig(dir.path, "app:\n  max_steps: 0\n");
    const schema = expectData(
      await failure(c.plan()),
      "config_invalid",
      shape({ file: "string", line: "number|null", key: "string|null", issues: "array" }),
    );
    expect(schema.issues?.[0]).toEqual({ key: "app.max_steps", message: expect.any(String) });

    writeConfig(dir.path, "app: [\n");
    expectData(
      await failure(c.plan()),
      "config_invalid",
      shape({ file: "string", line: "number|null", key: "string|null" }),
    );

    writeConfig(dir.path, "model:\n  path: ./none.gguf\n");
    const missing = expectData(
      await failure(c.plan()),
      "model_missing",
      shape({ path: "string", problem: "string" }),
    );
    expect(["absent", "unreadable", "not_gguf", "truncated"]).toContain(missing.problem!);

    // A loaded config stays loaded: a fresh core reads the next one.
    await using fits = tmpdir();
    writeFakeModel(fits.path, "m.gguf");
    writeFileSync(join(fits.path, "config.yaml"), "model:\n  path: ./m.gguf\nhardware:\n  ram_bytes: 1000\n");
    expectData(
      await failure((await client(fits.path)).plan()),
      "model_plan_error",
      // A model that does not fit names the device and the numbers (optional in the type: a
      // refused setting names only its key).
      shape({
        device: "string",
        needed_bytes: "number",
        available_bytes: "number",
        context_per_slot: "number",
        slots: "number",
      }),
    );

    // GPU layers asked of a machine with no GPU it can use (hardware.gpus: none found).
    await using noGpu = tmpdir();
    writeFakeModel(noGpu.path, "m.gguf");
    writeFileSync(
      join(noGpu.path, "config.yaml"),
      "model:\n  path: ./m.gguf\n  gpu_layers: 10\nhardware:\n  gpus: []\n",
    );
    const layers = expectData(
      await failure((await client(noGpu.path)).plan()),
      "model_plan_error",
      shape({ key: "string", gpus: "number" }),
    );
    expect(layers).toMatchObject({ key: "model.gpu_layers", gpus: 0 });
  }, 30_000);

  test("binary_missing, invalid_request (field, supported), unknown_method without data", async () => {
    await using dir = tmpdir();
    writeFakeModel(dir.path, "m.gguf");
    writeFileSync(
      join(dir.path, "config.yaml"),
      "llama:\n  binary: ./no-llama-server\nmodel:\n  path: ./m.gguf\n",
    );
    const c = await client(dir.path);
    const binary = expectData(await failure(c.warmup().result), "binary_missing", shape({ tried: "array" }));
    expect(binary.tried?.every((p) => typeof p === "string")).toBe(true);

    const field = expectData(
      await failure(c.chat({ session_id: "no spaces allowed" }).result),
      "invalid_request",
      shape({ field: "string|null" }),
    );
    expect(field.field).toBe("session_id");
    const versions = expectData(
      await failure(c.request("initialize", { protocol_versions: [99] })),
      "invalid_request",
      shape({ field: "string", supported: "array" }),
    );
    expect(versions.supported).toEqual([1]);

    const unknown = await failure(c.request("no.such.method"));
    expect(unknown.code).toBe("unknown_method");
    expect(unknown.data).toBeUndefined();
  }, 30_000);

  test("invalid_request line_too_long: a request line over the core's max_line_bytes fails its own call", async () => {
    await using dir = tmpdir();
    writeConfig(dir.path, "stdio:\n  max_line_bytes: 1024\n");
    const c = await client(dir.path);
    await c.doctor(); // the config, and its limit, are loaded
    // The core answers such a line with "id": null (it never read the id): the chat, which has no
    // time limit, waited for good, and a short call ended in a bare timeout.
    const chat = c.chat({ input: "y".repeat(5000) });
    const big = c.request("ping", { x: "z".repeat(3000) });
    const tooLong = expectData(
      await failure(chat.result),
      "invalid_request",
      shape({ reason: "string", line_bytes: "number", limit_bytes: "number" }),
    );
    expect(tooLong).toMatchObject({ reason: "line_too_long", limit_bytes: 1024 });
    expect(tooLong.line_bytes).toBeGreaterThan(5000);
    expect((await failure(big)).data).toMatchObject({ reason: "line_too_long", limit_bytes: 1024 });
    expect(await c.ping()).toEqual({ status: "ok" });
  }, 30_000);

  test("output_invalid: the answer's text, each error's path and message, the finish reason", async () => {
    await using dir = tmpdir();
    writeStack(dir.path, { tools: [], script: [{ content: '{"name":', finish_reason: "length" }] });
    const c = await client(dir.path);
    const schema = { type: "object", properties: { name: { type: "string" } }, required: ["name"] };
    const invalid = expectData(
      await failure(c.chat({ input: "a person", response_format: { type: "json_schema", schema } }).result),
      "output_invalid",
      shape({
        text: "string",
        errors: "array",
        errors_total: "number",
        finish_reason: "string|null",
        "trace_id?": "string",
      }),
    );
    expect(invalid.text).toBe('{"name":');
    expect(invalid.finish_reason).toBe("length");
    expect(invalid.errors[0]).toEqual({ path: "", message: expect.stringContaining("not valid JSON") });
  }, 30_000);

  test("too_many_requests: the limit, once MAX_IN_FLIGHT requests are in flight", async () => {
    await using dir = tmpdir();
    const c = await LocalAiClient.start({
      binary: hostBinary(),
      cwd: dir.path,
      env: { ...process.env, LOCAL_AI_TEST_METHODS: "1" },
    });
    clients.push(c);
    const held = Array.from({ length: MAX_IN_FLIGHT }, () =>
      c.request("test.sleep", { ms: 60_000 }).catch((e: unknown) => e),
    );
    const over = expectData(
      await failure(c.request("test.sleep", { ms: 1 })),
      "too_many_requests",
      shape({ limit: "number" }),
    );
    expect(over.limit).toBe(MAX_IN_FLIGHT);
    expect(await c.ping()).toEqual({ status: "ok" });
    c.kill();
    await Promise.all(held);
  }, 30_000);

  // A delete that erased its rows but not a saved KV state file (immutable here: chattr +i) fails
  // naming the files; the client typed them as `unknown`, so a host listed them only with a cast.
  test.skipIf(!canMakeImmutable("error-data kv erase"))(
    "internal_error of a delete whose KV state stays: key, file, files, files_count",
    async () => {
      await using dir = tmpdir();
      writeStack(dir.path, { tools: [], script: [{ content: "ok" }] });
      const c = await client(dir.path);
      await c.chat({ input: "hello", session_id: "s" }).result;
      const kv = join(dir.path, "data", "kv");
      mkdirSync(kv, { recursive: true });
      const bin = join(kv, `${new KvDisk(kv, 1).nameOf("default_user", "s")}.bin`);
      writeFileSync(bin, "the session's saved tokens");
      expect(makeImmutable(bin)).toBe(true);
      let err: LocalAiError;
      try {
        err = await failure(c.sessions.delete({ session_id: "s" }));
      } finally {
        undoImmutable();
      }
      const left = expectData(
        err,
        "internal_error",
        shape({ key: "string", file: "string", files: "array", files_count: "number" }),
      );
      const files: string[] | undefined = left.files;
      expect(files).toEqual([bin]);
      expect(left.files_count).toBe(1);
      expect(left.key).toBe("app.data_dir");
      expect(existsSync(bin)).toBe(true);
    },
    30_000,
  );

  test("core_exited, the client's own: exit code, signal, stderr tail, spawn error", async () => {
    await using dir = tmpdir();
    const err = await failure(LocalAiClient.start({ binary: join(dir.path, "no-such-core") }));
    expectData(
      err,
      "core_exited",
      shape({
        exit_code: "number|null",
        signal: "string|null",
        "spawn_error?": "string",
        stderr_tail: "array",
      }),
    );
    expect(String(err.data?.spawn_error)).toContain("ENOENT");
  });
});
