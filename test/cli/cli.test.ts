import { describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import {
  closeSync,
  existsSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { Writable } from "node:stream";
import { flushed, flushedForExit } from "../../src/cli/output.ts";
import { isAlive } from "../../src/runtime/proc-info.ts";
import { tinyLlama, writeGguf } from "../fixtures/gguf-writer.ts";
import { type Knobs, type StandInFile, startHubStandIn } from "../fixtures/hub-stand-in.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { waitFor } from "../fixtures/wait.ts";

/**
 * The command line as a person or a script meets it: the entry point run from source in a
 * child process with pipes (not a terminal) for stdout and stderr, as a script would run it.
 */
const ENTRY = join(import.meta.dir, "../../src/index.ts");
const ESC = "\u001b[";

function cleanEnv(extra: Record<string, string> = {}): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined) env[k] = v;
  // consola and citty change their looks under CI / test runners: run as a user's shell would.
  for (const k of ["NODE_ENV", "TEST", "CI", "NO_COLOR", "FORCE_COLOR", "TERM"]) delete env[k];
  return { ...env, LOCAL_AI_LOG_LEVEL: "info", ...extra };
}

async function cli(args: string[], options: { cwd?: string; env?: Record<string, string> } = {}) {
  const proc = Bun.spawn([process.execPath, ENTRY, ...args], {
    cwd: options.cwd,
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
    env: cleanEnv(options.env),
  });
  const [stdout, stderr, code] = await Promise.all([
    new Response(proc.stdout).text(),
    new Response(proc.stderr).text(),
    proc.exited,
  ]);
  return { stdout, stderr, code };
}

/** The hub stand-in serving org/tiny-GGUF, its one file written in `dir`. */
function tinyHub(dir: string) {
  const tiny = new Uint8Array(readFileSync(writeGguf(dir, "tiny.gguf", tinyLlama())));
  return startHubStandIn([{ id: "org/tiny-GGUF", files: [{ path: "tiny-Q4_K_M.gguf", content: tiny }] }]);
}

/**
 * A config.yaml in `dir` whose llama-server never answers (--list-devices hangs), each run
 * noting its pid in the file whose path is returned.
 */
function hungLlamaServer(dir: string): string {
  const pids = join(dir, "pids");
  const hung = join(dir, "hung-llama-server");
  writeFileSync(hung, `#!/bin/sh\necho $$ >> "${pids}"\nexec sleep 60\n`, { mode: 0o755 });
  writeFileSync(join(dir, "config.yaml"), `llama:\n  binary: ${hung}\nmodel:\n  path: m.gguf\n`);
  return pids;
}

describe("the CLI refuses nonsense (issue 13 item 6)", () => {
  test("a misspelt flag is an error with a suggestion and usage on stderr, exit 2", async () => {
    using dir = tmpdir();
    const r = await cli(["doctor", "--confg", "x.yaml"], { cwd: dir.path });
    expect(r.code).toBe(2);
    expect(r.stdout).toBe("");
    expect(r.stderr).toContain("unknown option '--confg'");
    expect(r.stderr).toContain("--config");
    expect(r.stderr).toContain("USAGE");
    // Refused before anything ran: doctor created nothing.
    expect(readdirSync(dir.path)).toEqual([]);
  });

  test("every command checks: serve-stdio does not start serving on a typo", async () => {
    const r = await cli(["serve-stdio", "--jsn"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("unknown option '--jsn'");
  });

  test("stray arguments, a flag without its value, and options before the command are errors", async () => {
    const stray = await cli(["plan", "extra"]);
    expect(stray.code).toBe(2);
    expect(stray.stderr).toContain("unexpected argument 'extra'");
    const noValue = await cli(["plan", "--config"]);
    expect(noValue.code).toBe(2);
    expect(noValue.stderr).toContain("'--config' needs a value");
    const before = await cli(["--config", "c.yaml", "doctor"]);
    expect(before.code).toBe(2);
    expect(before.stderr).toContain("'--config'");
    const boolValue = await cli(["doctor", "--json=yes"]);
    expect(boolValue.code).toBe(2);
  });

  test("a single-value option given twice is an error, whichever spelling, not the last one silently", async () => {
    for (const args of [
      ["doctor", "--config", "a.yaml", "--config", "b.yaml"],
      ["doctor", "--config=a.yaml", "--config", "b.yaml"],
      ["pull", "org/x:Q4_K_M", "--revision", "a", "--revision=b"],
    ]) {
      using dir = tmpdir();
      const r = await cli(args, { cwd: dir.path });
      expect(r.code).toBe(2);
      expect(r.stdout).toBe("");
      expect(r.stderr).toMatch(/option '--(config|revision)' given twice/);
      expect(readdirSync(dir.path)).toEqual([]);
    }
    // A flag said twice means what it says once.
    using dir = tmpdir();
    const twice = await cli(["models", "--json", "--json"], {
      cwd: dir.path,
      env: { HF_HOME: join(dir.path, "hf") },
    });
    expect(twice.code).toBe(0);
  });

  test("a flag given both on and off is an error, not off whichever came last", async () => {
    // citty applies every --no-X after the rest: `--no-json --json` printed the human view.
    for (const args of [
      ["models", "--no-json", "--json"],
      ["models", "--json", "--no-json"],
      ["models", "--json=false", "--json"],
    ]) {
      using dir = tmpdir();
      const r = await cli(args, { cwd: dir.path, env: { HF_HOME: join(dir.path, "hf") } });
      expect(r.code).toBe(2);
      expect(r.stdout).toBe("");
      expect(r.stderr).toContain("option '--json' given both on and off");
    }
  });

  test("--help after an unknown command is that error, exit 2, not the main usage and exit 0", async () => {
    const r = await cli(["pul", "--help"]);
    expect(r.code).toBe(2);
    expect(r.stdout).toBe("");
    expect(r.stderr).toContain("unknown command 'pul'");
    expect(r.stderr).toContain("USAGE");
  });

  test("--help after an option given before the command names the option, not its value as a command", async () => {
    const r = await cli(["--config", "mine.yaml", "--help"]);
    expect(r.code).toBe(2);
    expect(r.stdout).toBe("");
    expect(r.stderr.split("\n")[0]).toBe("[error] unknown option '--config' (options go after the command)");
  });

  test.each([[["--hf-token=hf_Zq81secret", "pull", "o/r"]], [["--api-key=sk-Zq81secret", "--help"]]])(
    "an option before the command is named without its =value (a token): %j",
    async (argv) => {
      // Named by its spelling after a command (check-args.ts): the value may be a credential,
      // and a usage error is pasted into issues as it is.
      const r = await cli(argv);
      expect(r.code).toBe(2);
      expect(r.stderr.split("\n")[0]).toMatch(
        /^\[error\] unknown option '--[a-z-]+' \(options go after the command\)$/,
      );
      expect(r.stderr).not.toContain("Zq81secret");
    },
  );

  test("the spellings citty accepts still work: --config=FILE, --no-json", async () => {
    using dir = tmpdir();
    const r = await cli(["plan", "--config=none.yaml", "--no-json"], { cwd: dir.path });
    expect(r.code).toBe(1); // config_missing, not a usage error
    expect(r.stderr).toContain("config_missing");
  });

  test("--help on a pipe or with NO_COLOR writes no ANSI colour, and still exits 0", async () => {
    for (const args of [["--help"], ["doctor", "--help"], ["plan", "-h"]]) {
      const r = await cli(args);
      expect(r.code).toBe(0);
      expect(r.stdout).toContain("USAGE");
      expect(r.stdout).not.toContain(ESC);
    }
  });

  // util-linux `script` gives the child a terminal, to show colour is kept where it belongs.
  const script = process.platform === "linux" ? Bun.which("script") : null;
  test.skipIf(!script)("on a terminal --help is coloured, unless NO_COLOR is set", async () => {
    const inTerminal = async (env: Record<string, string>) => {
      const command = `${process.execPath} ${ENTRY} --help`;
      const proc = Bun.spawn([script!, "-qec", command, "/dev/null"], {
        stdin: "ignore",
        stdout: "pipe",
        env: cleanEnv(env),
      });
      const out = await new Response(proc.stdout).text();
      expect(await proc.exited).toBe(0);
      return out;
    };
    expect(await inTerminal({})).toContain(ESC);
    const plain = await inTerminal({ NO_COLOR: "yes" });
    expect(plain).toContain("USAGE");
    expect(plain).not.toContain(ESC);
  });

  test("a LOCAL_AI_LOG_LEVEL that names no level is said once on stderr, not ignored without a word", async () => {
    using dir = tmpdir();
    writeFileSync(join(dir.path, "config.yaml"), "logging: { level: warn }\n");
    const r = await cli(["plan", "--json"], { cwd: dir.path, env: { LOCAL_AI_LOG_LEVEL: "verbose" } });
    expect(r.code).toBe(1);
    expect(JSON.parse(r.stdout).error.code).toBe("model_missing");
    const said = r.stderr.split("\n").filter((l) => l.includes("LOCAL_AI_LOG_LEVEL"));
    expect(said).toEqual([
      "[warn] LOCAL_AI_LOG_LEVEL 'verbose' is not a log level (silent, fatal, error, warn, info, debug, trace); it is ignored",
    ]);
    // Any case is a level; an empty value is no setting.
    for (const level of ["DEBUG", ""]) {
      const ok = await cli(["--version"], { env: { LOCAL_AI_LOG_LEVEL: level } });
      expect(ok.stderr).toBe("");
    }
  });

  test("log lines on a stderr that is not a terminal carry no glyphs or badges", async () => {
    const r = await cli(["frobnicate"]);
    expect(r.code).toBe(2);
    const first = r.stderr.split("\n")[0];
    expect(first).toBe("[error] unknown command 'frobnicate'");
    expect(r.stderr).not.toMatch(/[\u2139\u2716\u26a0\u2714]|\u001b\[/);
  });
});

describe("--json failures print a JSON error on stdout (issue 10 item 18)", () => {
  test("plan --json without a config: {error: {code, message, data}} on stdout, exit 1", async () => {
    using dir = tmpdir();
    const r = await cli(["plan", "--json"], { cwd: dir.path });
    expect(r.code).toBe(1);
    const out = JSON.parse(r.stdout);
    expect(out).toEqual({
      error: {
        code: "config_missing",
        message: expect.stringContaining("config.yaml"),
        data: { file: join(dir.path, "config.yaml") },
      },
    });
    expect(r.stderr).toContain("config_missing");
  });

  test("models: a config named with --config that is not there is config_missing; none named lists the cache", async () => {
    using dir = tmpdir();
    const missing = await cli(["models", "--json", "--config", "nope.yaml"], { cwd: dir.path });
    expect(missing.code).toBe(1);
    expect(JSON.parse(missing.stdout).error).toMatchObject({
      code: "config_missing",
      data: { file: join(dir.path, "nope.yaml") },
    });
    const plain = await cli(["models", "--json"], { cwd: dir.path, env: { HF_HOME: join(dir.path, "hf") } });
    expect(plain.code).toBe(0);
    expect(JSON.parse(plain.stdout).models).toEqual([]);
  });

  test("pull: a bad --revision is named quoted, an empty one too, not as '--revision :'", async () => {
    using dir = tmpdir();
    const env = { HF_ENDPOINT: "http://127.0.0.1:9", HF_HUB_CACHE: join(dir.path, "hub") };
    for (const [revision, shown] of [
      ["", "--revision '':"],
      ["../x", "--revision '../x':"],
    ]) {
      const r = await cli(["pull", "org/tiny-GGUF:Q4_K_M", "--json", "--revision", revision!], {
        cwd: dir.path,
        env,
      });
      expect(r.code).toBe(1);
      expect(JSON.parse(r.stdout)).toMatchObject({ type: "error", code: "invalid_request" });
      expect(JSON.parse(r.stdout).message).toStartWith(shown!);
    }
  });

  test("pull: a --config that is not there is config_missing before any download, not a verdict with the defaults", async () => {
    using dir = tmpdir();
    await using hub = await tinyHub(dir.path);
    const env = { HF_ENDPOINT: hub.url, HF_HUB_CACHE: join(dir.path, "hub") };
    const r = await cli(["pull", "org/tiny-GGUF:Q4_K_M", "--json", "--config", "nope.yaml"], {
      cwd: dir.path,
      env,
    });
    expect(r.code).toBe(1);
    expect(JSON.parse(r.stdout)).toMatchObject({
      type: "error",
      code: "config_missing",
      data: { file: join(dir.path, "nope.yaml") },
    });
    expect(hub.requests).toEqual([]);
    expect(existsSync(join(dir.path, "hub"))).toBe(false);
  });

  test("an empty --config (an unset variable) is config_invalid saying so, not the working folder, before any download", async () => {
    using dir = tmpdir();
    await using hub = await tinyHub(dir.path);
    const env = { HF_ENDPOINT: hub.url, HF_HUB_CACHE: join(dir.path, "hub") };
    const pull = await cli(["pull", "org/tiny-GGUF:Q4_K_M", "--json", "--config="], { cwd: dir.path, env });
    expect(pull.code).toBe(1);
    expect(JSON.parse(pull.stdout)).toMatchObject({ type: "error", code: "config_invalid" });
    expect(JSON.parse(pull.stdout).message).toContain("--config is empty");
    expect(hub.requests).toEqual([]);
    for (const command of ["plan", "models"]) {
      const r = await cli([command, "--json", "--config", ""], { cwd: dir.path, env });
      expect(r.code).toBe(1);
      expect(JSON.parse(r.stdout).error.message).toContain("--config is empty");
    }
    const doctor = await cli(["doctor", "--json", "--config="], { cwd: dir.path, env });
    expect(JSON.parse(doctor.stdout).checks[0].message).toContain("--config is empty");
  });

  test("plan --model '' is invalid_request naming the model, not a plan of the working folder", async () => {
    using dir = tmpdir();
    const r = await cli(["plan", "--json", "--model", ""], { cwd: dir.path });
    expect(r.code).toBe(1);
    expect(JSON.parse(r.stdout).error).toMatchObject({ code: "invalid_request", data: { field: "model" } });
  });

  test("plan --json with an invalid config names the key", async () => {
    using dir = tmpdir();
    writeFileSync(join(dir.path, "config.yaml"), "app: { max_steps: -1 }\n");
    const r = await cli(["plan", "--json"], { cwd: dir.path });
    expect(r.code).toBe(1);
    expect(JSON.parse(r.stdout).error).toMatchObject({
      code: "config_invalid",
      data: { key: "app.max_steps" },
    });
  });

  test("plan without --json keeps stdout empty on failure", async () => {
    using dir = tmpdir();
    const r = await cli(["plan"], { cwd: dir.path });
    expect(r.code).toBe(1);
    expect(r.stdout).toBe("");
  });
});

describe("doctor on the CLI: one failure for one cause, nothing created (issue 10 item 18)", () => {
  test("SIGTERM or SIGINT to doctor alone ends its probes with it: exit 143 / 130, no llama-server left", async () => {
    using dir = tmpdir();
    // A llama-server whose --version never answers, noting each pid it runs as.
    const pids = join(dir.path, "pids");
    const hung = join(dir.path, "hung-llama-server");
    writeFileSync(hung, `#!/bin/sh\necho $$ >> "${pids}"\nexec sleep 60\n`, { mode: 0o755 });
    writeFileSync(join(dir.path, "config.yaml"), `llama:\n  binary: ${hung}\nmodel:\n  path: m.gguf\n`);
    for (const [signal, code] of [
      ["SIGTERM", 143],
      ["SIGINT", 130],
    ] as const) {
      rmSync(pids, { force: true });
      const proc = Bun.spawn([process.execPath, ENTRY, "doctor"], {
        cwd: dir.path,
        stdin: "ignore",
        stdout: "ignore",
        stderr: "pipe",
        env: cleanEnv(),
      });
      // The probe runs (it waits up to 5 s for --version) when the signal comes.
      expect(await waitFor(() => existsSync(pids))).toBe(true);
      proc.kill(signal);
      const [stderr, exit] = await Promise.all([new Response(proc.stderr).text(), proc.exited]);
      expect(stderr).toBe("");
      expect(exit).toBe(code);
      for (const pid of readFileSync(pids, "utf8").trim().split("\n").map(Number))
        expect(await waitFor(() => !isAlive(pid))).toBe(true);
    }
  }, 30_000);

  test("no config: the config fails, what depends on it is skipped, the folder stays empty", async () => {
    using dir = tmpdir();
    const r = await cli(["doctor", "--json"], { cwd: dir.path });
    expect(r.code).toBe(1);
    const report = JSON.parse(r.stdout);
    const statuses = Object.fromEntries(
      report.checks.map((c: { id: string; status: string }) => [c.id, c.status]),
    );
    expect(statuses).toMatchObject({
      config: "fail",
      binary: "skip",
      model: "skip",
      data_dir: "skip",
      plan: "skip",
    });
    expect(report.checks.filter((c: { status: string }) => c.status === "fail")).toHaveLength(1);
    expect(readdirSync(dir.path)).toEqual([]);
  });

  test("the human view says what was skipped and counts one failure", async () => {
    using dir = tmpdir();
    writeFileSync(join(dir.path, "config.yaml"), "app: { max_steps: -1 }\n");
    const r = await cli(["doctor"], { cwd: dir.path });
    expect(r.code).toBe(1);
    expect(r.stdout).toContain("1 check failed");
    expect(r.stdout).toMatch(/skip.*binary/);
    expect(r.stdout).not.toContain(ESC);
    expect(readdirSync(dir.path)).toEqual(["config.yaml"]);
  });
});

describe.skipIf(!existsSync("/dev/full"))("a document that cannot be written", () => {
  test.each(["models --json", "models", "doctor --json", "plan --json"])(
    "%s to a full disk: exit 1 saying so, not exit 0 with nothing written",
    async (command) => {
      const args = command.split(" ");
      using dir = tmpdir();
      writeGguf(dir.path, "m.gguf", tinyLlama());
      writeFileSync(join(dir.path, "config.yaml"), "model:\n  path: m.gguf\n");
      const full = openSync("/dev/full", "w");
      try {
        const proc = Bun.spawn([process.execPath, ENTRY, ...args], {
          cwd: dir.path,
          stdin: "ignore",
          stdout: full,
          stderr: "pipe",
          env: cleanEnv({ HF_HOME: join(dir.path, "hf") }),
        });
        const [stderr, code] = await Promise.all([new Response(proc.stderr).text(), proc.exited]);
        expect(code).toBe(1);
        expect(stderr).toContain("no space left on device");
        expect(stderr).not.toContain("    at ");
      } finally {
        closeSync(full);
      }
    },
  );
});

describe.skipIf(!existsSync("/dev/full"))("output that cannot be written", () => {
  /** The command with its stdout on /dev/full: its exit code and stderr. */
  async function toFullDisk(args: string[], cwd?: string, env: Record<string, string> = {}) {
    const full = openSync("/dev/full", "w");
    try {
      const proc = Bun.spawn([process.execPath, ENTRY, ...args], {
        cwd,
        stdin: "ignore",
        stdout: full,
        stderr: "pipe",
        env: cleanEnv(env),
      });
      const [stderr, code] = await Promise.all([new Response(proc.stderr).text(), proc.exited]);
      return { stderr, code };
    } finally {
      closeSync(full);
    }
  }

  test.each(["--version", "--help", "models --help"])(
    "%s to a full disk: exit 1 saying so, not exit 0 with nothing written",
    async (command) => {
      const r = await toFullDisk(command.split(" "));
      expect(r.code).toBe(1);
      expect(r.stderr).toContain("no space left on device");
      expect(r.stderr).not.toContain("    at ");
    },
  );

  test("a --json failure's error document on a full disk: exit 1, and stderr says it was not written", async () => {
    using dir = tmpdir();
    const r = await toFullDisk(["models", "--json", "--config", "nope.yaml"], dir.path);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("config_missing");
    expect(r.stderr).toContain("no space left on device");
    expect(r.stderr).not.toContain("    at ");
  });

  test("pull --json's progress on a full disk: the stop says the disk is full, not that stdout was closed", async () => {
    using dir = tmpdir();
    await using hub = await tinyHub(dir.path);
    const env = { HF_ENDPOINT: hub.url, HF_HUB_CACHE: join(dir.path, "hub") };
    const r = await toFullDisk(["pull", "org/tiny-GGUF:Q4_K_M", "--json"], dir.path, env);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("no space left on device");
    expect(r.stderr).not.toContain("stdout was closed");
    expect(r.stderr).not.toContain("    at ");
  });
});

describe.skipIf(process.platform !== "linux")("pull's result line that cannot be written", () => {
  test("a file stdout that takes the progress but not the result: exit 1 saying so, not exit 0", async () => {
    using dir = tmpdir();
    await using hub = await tinyHub(dir.path);
    const env = cleanEnv({ HF_ENDPOINT: hub.url, HF_HUB_CACHE: join(dir.path, "hub") });
    const pull = ["pull", "org/tiny-GGUF:Q4_K_M", "--json"];
    // Pulled once, so the second pull has one short progress line (~170 bytes), then its result (~900).
    const first = Bun.spawn([process.execPath, ENTRY, ...pull], { cwd: dir.path, stdin: "ignore", env });
    expect(await first.exited).toBe(0);
    // A file that may not grow past 512 (or 1024) bytes: the result's write fails with EFBIG
    // part-way, as a disk that fills up under it would (SIGXFSZ ignored, so the write says so).
    const out = join(dir.path, "out.ndjson");
    const proc = Bun.spawn(
      ["sh", "-c", `trap '' XFSZ; ulimit -f 1; exec "$0" "$@" > "${out}"`, process.execPath, ENTRY, ...pull],
      { cwd: dir.path, stdin: "ignore", stderr: "pipe", env },
    );
    const [stderr, code] = await Promise.all([new Response(proc.stderr).text(), proc.exited]);
    const lines = readFileSync(out, "utf8").split("\n");
    expect(lines[0]).toContain('"download_progress"'); // the progress was written
    expect(readFileSync(out, "utf8")).not.toContain('"fit"'); // its result was not
    expect(code).toBe(1);
    expect(stderr).toContain("stdout could not be written");
    expect(stderr).toContain("the model is in the cache");
    expect(stderr).not.toContain("    at ");
  });
});

describe.skipIf(process.platform !== "linux")("a closed stdout (`>&-`)", () => {
  // The runtime puts /dev/null where a closed stdout was: the write "succeeds" into nothing.
  test.each(["models --json", "--version"])(
    "%s: exit 1 with one line on stderr, not exit 0 with nothing written",
    async (command) => {
      using dir = tmpdir();
      const proc = Bun.spawn(
        ["sh", "-c", `exec "$0" "$@" >&-`, process.execPath, ENTRY, ...command.split(" ")],
        {
          cwd: dir.path,
          stdin: "ignore",
          stdout: "pipe",
          stderr: "pipe",
          env: cleanEnv({ HF_HOME: join(dir.path, "hf") }),
        },
      );
      const [stderr, code] = await Promise.all([new Response(proc.stderr).text(), proc.exited]);
      expect(code).toBe(1);
      expect(stderr).toContain("stdout is closed");
      expect(stderr.trim().split("\n")).toHaveLength(1);
    },
  );

  test("pull: stopped at its first line as when its reader left, exit 1", async () => {
    using dir = tmpdir();
    await using hub = await tinyHub(dir.path);
    const proc = Bun.spawn(
      ["sh", "-c", `exec "$0" "$@" >&-`, process.execPath, ENTRY, "pull", "org/tiny-GGUF:Q4_K_M"],
      {
        cwd: dir.path,
        stdin: "ignore",
        stderr: "pipe",
        env: cleanEnv({ HF_ENDPOINT: hub.url, HF_HUB_CACHE: join(dir.path, "hub") }),
      },
    );
    const [stderr, code] = await Promise.all([new Response(proc.stderr).text(), proc.exited]);
    expect(code).toBe(1);
    expect(stderr).toContain("stdout was closed, so the pull stopped");
    expect(stderr).not.toContain("    at ");
  });

  test("pull of a model already in the cache: stopped at its first line, it says the model is there, not a partial", async () => {
    using dir = tmpdir();
    await using hub = await tinyHub(dir.path);
    const env = cleanEnv({ HF_ENDPOINT: hub.url, HF_HUB_CACHE: join(dir.path, "hub") });
    const pull = ["pull", "org/tiny-GGUF:Q4_K_M"];
    const first = Bun.spawn([process.execPath, ENTRY, ...pull], { cwd: dir.path, stdin: "ignore", env });
    expect(await first.exited).toBe(0);
    const proc = Bun.spawn(["sh", "-c", `exec "$0" "$@" >&-`, process.execPath, ENTRY, ...pull], {
      cwd: dir.path,
      stdin: "ignore",
      stderr: "pipe",
      env,
    });
    const [stderr, code] = await Promise.all([new Response(proc.stderr).text(), proc.exited]);
    expect(code).toBe(1);
    expect(stderr).toContain("stdout was closed, so the pull stopped");
    expect(stderr).toContain("the model is in the cache");
    expect(stderr).not.toContain("partial download");
    expect(stderr).not.toContain("    at ");
  });

  test("> /dev/null is still a place to write to: exit 0", async () => {
    const proc = Bun.spawn(["sh", "-c", `exec "$0" "$@" > /dev/null`, process.execPath, ENTRY, "--version"], {
      stdin: "ignore",
      stderr: "pipe",
      env: cleanEnv(),
    });
    const [stderr, code] = await Promise.all([new Response(proc.stderr).text(), proc.exited]);
    expect(code).toBe(0);
    expect(stderr).toBe("");
  });
});

describe("pull stopped by a signal after its download", () => {
  test("Ctrl-C during the fit check: exit 130 at once, its probe ended, no result printed, the file kept", async () => {
    using dir = tmpdir();
    await using hub = await tinyHub(dir.path);
    // The fit check's llama-server --list-devices never answers (it waits up to 5 s).
    const pids = hungLlamaServer(dir.path);
    const cache = join(dir.path, "hub");
    const proc = Bun.spawn([process.execPath, ENTRY, "pull", "org/tiny-GGUF:Q4_K_M", "--json"], {
      cwd: dir.path,
      stdin: "ignore",
      stdout: "pipe",
      stderr: "pipe",
      env: cleanEnv({ HF_ENDPOINT: hub.url, HF_HUB_CACHE: cache }),
    });
    // The download is done: the fit check's probe runs when the signal comes.
    expect(await waitFor(() => existsSync(pids))).toBe(true);
    proc.kill("SIGINT");
    const [stdout, stderr, exit] = await Promise.all([
      new Response(proc.stdout).text(),
      new Response(proc.stderr).text(),
      proc.exited,
    ]);
    expect(exit).toBe(130);
    const lines = stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(lines.some((l) => l.type === "result")).toBe(false);
    expect(lines.at(-1)).toMatchObject({ type: "error", code: "cancelled" });
    expect(stderr).toContain("the downloaded file is in the cache");
    expect(stderr).not.toContain("partial download");
    expect(stderr).not.toContain("    at ");
    for (const pid of readFileSync(pids, "utf8").trim().split("\n").map(Number))
      expect(await waitFor(() => !isAlive(pid))).toBe(true);
    // The download was whole before the signal: it stays in the cache, nothing partial beside it.
    const blobs = readdirSync(join(cache, "models--org--tiny-GGUF", "blobs"));
    expect(blobs).toHaveLength(1);
    expect(blobs[0]).not.toContain(".incomplete");
  }, 30_000);
});

describe("pull stopped by a signal before its download", () => {
  /** `pull org/tiny-GGUF:Q4_K_M` (and `extra`) in `dir` against a stand-in hub with `knobs`. */
  async function pullTiny(dir: string, knobs: Knobs, extra: string[] = [], more: StandInFile[] = []) {
    const tiny = new Uint8Array(readFileSync(writeGguf(dir, "tiny.gguf", tinyLlama())));
    const hub = await startHubStandIn(
      [{ id: "org/tiny-GGUF", files: [{ path: "tiny-Q4_K_M.gguf", content: tiny }, ...more] }],
      knobs,
    );
    const cache = join(dir, "hub");
    const proc = Bun.spawn([process.execPath, ENTRY, "pull", "org/tiny-GGUF:Q4_K_M", ...extra], {
      cwd: dir,
      stdin: "ignore",
      stdout: "pipe",
      stderr: "pipe",
      env: cleanEnv({ HF_ENDPOINT: hub.url, HF_HUB_CACHE: cache }),
    });
    const partials = () =>
      (existsSync(cache) ? readdirSync(cache, { recursive: true }).map(String) : []).filter((f) =>
        f.endsWith(".incomplete"),
      );
    return { hub, proc, partials };
  }

  test("Ctrl-C while the hub is asked which file: exit 130, no partial claimed where none was written", async () => {
    using dir = tmpdir();
    // The hub's API answers late: the signal comes while the pull waits for the listing.
    const { hub, proc, partials } = await pullTiny(dir.path, { apiDelayMs: 60_000 });
    await using _hub = hub;
    expect(await waitFor(() => hub.requests.length > 0)).toBe(true);
    proc.kill("SIGINT");
    const [stderr, exit] = await Promise.all([new Response(proc.stderr).text(), proc.exited]);
    expect(exit).toBe(130);
    expect(stderr.trim().split("\n")).toEqual(["[warn] pull cancelled before its download began"]);
    expect(partials()).toEqual([]);
  }, 30_000);

  // Before: "pull cancelled before its download began", as if the earlier run's bytes were gone.
  test("Ctrl-C while the hub is asked, an earlier run's partial on disk: the message says it is kept", async () => {
    using dir = tmpdir();
    const { hub, proc, partials } = await pullTiny(dir.path, { apiDelayMs: 60_000 });
    await using _hub = hub;
    const blobs = join(dir.path, "hub", "models--org--tiny-GGUF", "blobs");
    mkdirSync(blobs, { recursive: true });
    writeFileSync(join(blobs, `${"a".repeat(64)}.incomplete`), "earlier bytes");
    expect(await waitFor(() => hub.requests.length > 0)).toBe(true);
    proc.kill("SIGINT");
    const [stderr, exit] = await Promise.all([new Response(proc.stderr).text(), proc.exited]);
    expect(exit).toBe(130);
    expect(stderr.trim().split("\n")).toEqual([
      "[warn] pull cancelled before its download began; a partial download an earlier pull of this repo left is kept",
    ]);
    expect(partials()).toHaveLength(1);
  }, 30_000);

  test("Ctrl-C once the storage answered but before its first byte: no partial claimed, the empty one dropped", async () => {
    using dir = tmpdir();
    // The storage sends its headers, then nothing: the download's first event (0 bytes) is out.
    const { hub, proc, partials } = await pullTiny(dir.path, { hangAfter: 0 }, ["--json"]);
    await using _hub = hub;
    const reader = proc.stdout.getReader();
    const decoder = new TextDecoder();
    let stdout = "";
    while (!stdout.includes('"phase":"download"')) {
      const r = await reader.read();
      if (r.done) break;
      stdout += decoder.decode(r.value, { stream: true });
    }
    expect(stdout).toContain('"phase":"download"');
    proc.kill("SIGINT");
    for (let r = await reader.read(); !r.done; r = await reader.read()) stdout += decoder.decode(r.value);
    const [stderr, exit] = await Promise.all([new Response(proc.stderr).text(), proc.exited]);
    expect(exit).toBe(130);
    const last = JSON.parse(stdout.trim().split("\n").at(-1)!);
    expect(last).toMatchObject({ type: "error", code: "cancelled", data: { bytes_done: 0 } });
    expect(last.message).not.toContain("kept");
    // --json says the error on stderr too: neither line claims a partial.
    expect(stderr).toContain("[warn] pull cancelled before its download began");
    expect(stderr).not.toContain("kept");
    expect(partials()).toEqual([]);
  }, 30_000);

  test("Ctrl-C while the projector's storage is asked, the model whole: the CLI does not say nothing began", async () => {
    using dir = tmpdir();
    // Part 2 (the projector) is asked for after part 1's last event; its storage never answers.
    const projector = { path: "mmproj-tiny-f16.gguf", content: new Uint8Array(4096).fill(7) };
    const { hub, proc } = await pullTiny(dir.path, { silentFile: projector.path }, [], [projector]);
    await using _hub = hub;
    const sha = createHash("sha256").update(projector.content).digest("hex");
    expect(
      await waitFor(() => hub.requests.some((r) => r.server === "storage" && r.path.includes(sha))),
    ).toBe(true);
    proc.kill("SIGINT");
    const [stderr, exit] = await Promise.all([new Response(proc.stderr).text(), proc.exited]);
    expect(exit).toBe(130);
    expect(existsSync(join(dir.path, "hub", "models--org--tiny-GGUF", "snapshots"))).toBe(true);
    expect(stderr).not.toContain("before its download began");
    expect(stderr).toContain("kept");
  }, 30_000);
});

/**
 * serve-stdio run in `dir` against `hubUrl`, the pull of org/tiny-GGUF sent, and as soon as its
 * fit check's probe has started (`pids` written), its cancel.
 */
async function pullCancelledInFitCheck(
  dir: string,
  hubUrl: string,
  pids: string,
  env: Record<string, string> = {},
) {
  const proc = Bun.spawn([process.execPath, ENTRY, "serve-stdio"], {
    cwd: dir,
    stdin: "pipe",
    stdout: "pipe",
    stderr: "pipe",
    env: cleanEnv({ HF_ENDPOINT: hubUrl, HF_HUB_CACHE: join(dir, "hub"), ...env }),
  });
  const send = (m: unknown) => {
    proc.stdin.write(`${JSON.stringify(m)}\n`);
    proc.stdin.flush();
  };
  send({ id: "p", method: "pull", params: { repo: "org/tiny-GGUF", quant: "q4_k_m" } });
  expect(await waitFor(() => existsSync(pids))).toBe(true);
  send({ id: "c", method: "cancel", params: { request_id: "p" } });
  return { proc, send };
}

describe("serve-stdio's exit", () => {
  test("a pull cancelled during its fit check, then the core ended: the verdict's probe does not outlive it", async () => {
    using dir = tmpdir();
    await using hub = await tinyHub(dir.path);
    // The fit check's llama-server --list-devices never answers (a GPU backend that never starts).
    const pids = hungLlamaServer(dir.path);
    // The host cancels and quits (an app closing): the cancel is answered at once, the core exits.
    const { proc } = await pullCancelledInFitCheck(dir.path, hub.url, pids);
    proc.stdin.end();
    const [stdout, , exit] = await Promise.all([
      new Response(proc.stdout).text(),
      new Response(proc.stderr).text(),
      proc.exited,
    ]);
    expect(exit).toBe(0);
    expect(stdout).toContain('"code":"cancelled"');
    // Its probe was left to finish for the plans after it; with no core left, nothing would end it.
    for (const pid of readFileSync(pids, "utf8").trim().split("\n").map(Number)) {
      const gone = await waitFor(() => !isAlive(pid));
      if (!gone) process.kill(pid, "SIGKILL");
      expect(gone).toBe(true);
    }
  }, 30_000);
});

// `serve-stdio < somedir`: reading stdin failed at once (EISDIR) and the core died with a "fatal"
// stack trace on stderr, naming neither stdin nor what to do about it.
test("serve-stdio whose stdin is a directory says so in one line and exits 1, no stack trace", async () => {
  using dir = tmpdir();
  const fd = openSync(dir.path, "r");
  try {
    const proc = Bun.spawn([process.execPath, ENTRY, "serve-stdio"], {
      cwd: dir.path,
      stdin: fd,
      stdout: "pipe",
      stderr: "pipe",
      env: cleanEnv(),
    });
    const [stdout, stderr, code] = await Promise.all([
      new Response(proc.stdout).text(),
      new Response(proc.stderr).text(),
      proc.exited,
    ]);
    expect(code).toBe(1);
    expect(stdout).toBe("");
    expect(stderr).toContain("stdin is a directory");
    expect(stderr).not.toContain("fatal");
    expect(stderr).not.toMatch(/^\s+at /m);
    expect(stderr.trim().split("\n")).toHaveLength(1);
  } finally {
    closeSync(fd);
  }
}, 30_000);

/** serve-stdio run in `dir`, with a Hugging Face cache of its own. */
function coreIn(dir: string, env: Record<string, string> = {}) {
  return Bun.spawn([process.execPath, ENTRY, "serve-stdio"], {
    cwd: dir,
    stdin: "pipe",
    stdout: "pipe",
    stderr: "pipe",
    env: cleanEnv({ HF_HUB_CACHE: join(dir, "hub"), ...env }),
  });
}

/** The core's answers as they come (`reading` ends with its stdout). */
function linesOf(stdout: ReadableStream<Uint8Array>) {
  const answers: Record<string, any>[] = [];
  const reading = (async () => {
    let rest = "";
    for await (const chunk of stdout) {
      const lines = (rest + new TextDecoder().decode(chunk)).split("\n");
      rest = lines.pop()!;
      for (const line of lines) answers.push(JSON.parse(line));
    }
  })();
  return { answers, reading };
}

/**
 * The hung probe's timeout in the tests that wait it out (plan/probe.ts; 5 s in production): long
 * enough for the request that must join the probe to come while it still runs.
 */
const HUNG_PROBE_ENV = { LOCAL_AI_TEST_LIST_DEVICES_TIMEOUT_MS: "2000" };

describe('one llama-server --list-devices at a time (docs/plan.md, "Which GPUs")', () => {
  test("a plan after a pull cancelled during its fit check joins the probe still running", async () => {
    using dir = tmpdir();
    await using hub = await tinyHub(dir.path);
    // --list-devices never answers: each probe runs until its timeout (2 s here) kills it. On CUDA
    // a second one beside it would read the VRAM the first one's context holds as used.
    const pids = hungLlamaServer(dir.path);
    writeGguf(dir.path, "m.gguf", tinyLlama());
    const { proc, send } = await pullCancelledInFitCheck(dir.path, hub.url, pids, HUNG_PROBE_ENV);
    const { answers, reading } = linesOf(proc.stdout);
    const answered = (id: string) => waitFor(() => answers.some((a) => a.id === id && a.type !== "event"));
    expect(await answered("p")).toBe(true);
    // The pull's probe still runs: the plan waits for it rather than starting another.
    send({ id: "plan", method: "plan", params: {} });
    expect(await answered("plan")).toBe(true);
    proc.stdin.end();
    await Promise.all([reading, new Response(proc.stderr).text(), proc.exited]);
    const started = readFileSync(pids, "utf8").trim().split("\n").map(Number);
    for (const pid of started) if (isAlive(pid)) process.kill(pid, "SIGKILL");
    expect(started).toHaveLength(1);
    const plan = answers.find((a) => a.id === "plan");
    expect(plan?.error).toBeUndefined();
    // The joined probe's answer is the plan's: the binary's device list timed out.
    const listed = plan?.result.hardware.probes.find((p: { id: string }) => p.id === "llama-server");
    expect(listed?.status).toBe("timeout");
  }, 30_000);
});

describe('models beside a plan (docs/plan.md, "Which GPUs")', () => {
  test("the listing's fit verdicts join the plan's probe still running, not a second one", async () => {
    using dir = tmpdir();
    const pids = hungLlamaServer(dir.path);
    writeGguf(dir.path, "m.gguf", tinyLlama());
    const proc = coreIn(dir.path, HUNG_PROBE_ENV);
    proc.stdin.write(`${JSON.stringify({ id: "plan", method: "plan", params: {} })}\n`);
    proc.stdin.flush();
    expect(await waitFor(() => existsSync(pids))).toBe(true);
    // The plan's probe runs (up to 2 s here): the listing, which probes too, must join it.
    const { answers, reading } = linesOf(proc.stdout);
    proc.stdin.write(`${JSON.stringify({ id: "models", method: "models", params: {} })}\n`);
    proc.stdin.flush();
    // Both answered before the end of input, which would stop them (docs/protocol.md "shutdown");
    // the plan's after its probe's timeout.
    const answered = (id: string) =>
      waitFor(() => answers.some((a) => a.id === id && a.type !== "event"), { timeoutMs: 20_000 });
    expect(await answered("models")).toBe(true);
    expect(await answered("plan")).toBe(true);
    proc.stdin.end();
    await Promise.all([reading, new Response(proc.stderr).text(), proc.exited]);
    const started = readFileSync(pids, "utf8").trim().split("\n").map(Number);
    for (const pid of started) if (isAlive(pid)) process.kill(pid, "SIGKILL");
    expect(started).toHaveLength(1);
    const models = answers.find((a) => a.id === "models");
    expect(models?.result.models.map((m: { path: string }) => m.path)).toEqual([join(dir.path, "m.gguf")]);
    expect(answers.find((a) => a.id === "plan")?.result.plan.gpu_layers).toBe(0);
  }, 30_000);
});

/**
 * A config.yaml in `dir` whose llama-server is a CPU build that answers at once, each
 * `--list-devices` noting its pid in the file whose path is returned.
 */
function cpuBuild(dir: string): string {
  const pids = join(dir, "pids");
  const binary = join(dir, "llama-server");
  const listing = `echo $$ >> "${pids}"; echo "Available devices:"; echo "  (none)"`;
  writeFileSync(binary, `#!/bin/sh\nif [ "$1" = --list-devices ]; then ${listing}; fi\n`, { mode: 0o755 });
  writeFileSync(join(dir, "config.yaml"), `llama:\n  binary: ${binary}\nmodel:\n  path: m.gguf\n`);
  return pids;
}

describe("between initialize and the first chat (docs/performance.md, A cold chat's way to the spawn)", () => {
  const between = {
    // A host's model picker lists the models as soon as the core is up, then the user chats.
    models: { id: "between", method: "models", params: {} },
    // An app makes sure its model is there (already whole in the cache, or a quick download).
    pull: { id: "between", method: "pull", params: { repo: "org/tiny-GGUF", quant: "q4_k_m" } },
    // Or shows its diagnostics page.
    doctor: { id: "between", method: "doctor", params: {} },
  };
  for (const [name, request] of Object.entries(between))
    test(`${name} leaves initialize's read-ahead to the plan after it: one --list-devices in all`, async () => {
      using dir = tmpdir();
      await using hub = await tinyHub(dir.path);
      const pids = cpuBuild(dir.path);
      writeGguf(dir.path, "m.gguf", tinyLlama());
      const proc = coreIn(dir.path, { HF_ENDPOINT: hub.url });
      const { answers, reading } = linesOf(proc.stdout);
      const send = (m: unknown) => {
        proc.stdin.write(`${JSON.stringify(m)}\n`);
        proc.stdin.flush();
      };
      const answered = (id: string) => waitFor(() => answers.some((a) => a.id === id && a.type !== "event"));
      send({ id: "i", method: "initialize", params: {} });
      expect(await answered("i")).toBe(true);
      expect(await waitFor(() => existsSync(pids))).toBe(true);
      send(request);
      expect(await answered("between")).toBe(true);
      send({ id: "plan", method: "plan", params: {} });
      expect(await answered("plan")).toBe(true);
      proc.stdin.end();
      await Promise.all([reading, new Response(proc.stderr).text(), proc.exited]);
      expect(answers.find((a) => a.id === "between")?.error).toBeUndefined();
      expect(answers.find((a) => a.id === "plan")?.result.plan.gpu_layers).toBe(0);
      // Neither loads anything: the plan still takes the probe made ahead.
      expect(readFileSync(pids, "utf8").trim().split("\n")).toHaveLength(1);
    }, 30_000);
});

describe('several models on the CLI (issue 28; docs/models.md "Several models")', () => {
  test("plan --model NAME plans that entry; a pinned pair over the budget is a warning", async () => {
    using dir = tmpdir();
    for (const f of ["main.gguf", "a.gguf", "b.gguf"]) writeGguf(dir.path, f, tinyLlama());
    // tinyLlama at 2048 tokens plans ~14 MB: each fits 20 MB alone, the two together do not.
    writeFileSync(
      join(dir.path, "config.yaml"),
      [
        "model: {path: ./main.gguf, context: 2048}",
        "models:",
        "  - {name: a, path: ./a.gguf, context: 2048, pin: true, extra_args: [--a-only]}",
        "  - {name: b, path: ./b.gguf, context: 2048, pin: true}",
        "hardware: {ram_bytes: 20000000}",
        "",
      ].join("\n"),
    );
    const r = await cli(["plan", "--model", "a", "--json"], { cwd: dir.path });
    expect(r.code).toBe(0);
    const report = JSON.parse(r.stdout);
    expect(report.model.path).toBe(join(dir.path, "a.gguf"));
    expect(report.plan.argv).toContain("--a-only");
    expect(report.plan.warnings.join("\n")).toContain("the pinned models a, b cannot stay loaded together");
    const pretty = await cli(["plan"], { cwd: dir.path });
    expect(pretty.code).toBe(0);
    expect(pretty.stdout).toContain("main.gguf");
    expect(pretty.stdout).toContain("the pinned models a, b");
  });
});

describe("flushed", () => {
  /** A stream whose writes are taken only when `release` is called: a reader slower than the writer. */
  function slowStream() {
    const held: (() => void)[] = [];
    const stream = new Writable({
      write(_chunk, _enc, done) {
        held.push(() => done());
      },
    });
    return {
      stream,
      release: () => {
        for (const done of held.splice(0)) done();
      },
    };
  }

  // `timeout 10 local-ai pull --json … | stalled-reader`: one SIGTERM must end it (a review).
  test("after a signal (130, 143) the wait is bounded; a plain exit still waits for the reader", async () => {
    for (const code of [130, 143]) {
      const { stream } = slowStream();
      stream.write("x".repeat(100_000));
      const t0 = Date.now();
      await flushedForExit(stream, code, 50);
      expect(Date.now() - t0).toBeLessThan(5000);
    }
    const { stream, release } = slowStream();
    stream.write("x".repeat(100_000));
    let done = false;
    const out = flushedForExit(stream, 0, 50).then(() => {
      done = true;
    });
    await Bun.sleep(200);
    expect(done).toBe(false);
    release();
    await out;
    expect(done).toBe(true);
  });

  test("waits for output still queued in the process, which process.exit would drop (a hostile review)", async () => {
    const { stream, release } = slowStream();
    stream.write("x".repeat(100_000));
    let done = false;
    const out = flushed(stream).then(() => {
      done = true;
    });
    await Bun.sleep(0);
    expect(done).toBe(false);
    release();
    await out;
    expect(done).toBe(true);
  });

  test("a reader that went away (EPIPE) ends the wait, with no uncaught error", async () => {
    const { stream } = slowStream();
    stream.write("x");
    const out = flushed(stream);
    stream.destroy(Object.assign(new Error("write EPIPE"), { code: "EPIPE" }));
    await out;
    expect(stream.errored).toBeTruthy();
    await flushed(stream);
  });
});
