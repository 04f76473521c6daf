import { describe, expect, test } from "bun:test";
import { judgeLeftover } from "../../src/runtime/leftover-verdict.ts";

// Paths compare as written here; symlinks are pid-file.ts's business (reap.test.ts).
const same = (a: string, b: string) => a === b;
const WRAPPER = "/opt/app/llama-server";
const ARGS = ["-m", "/m/model gguf.gguf", "--port", "4242"];
const record = { start_time: "100", binary: WRAPPER, argv: ARGS };

describe("judgeLeftover: is the live process at a recorded pid the child a dead core launched?", () => {
  test('the binary itself, its script under an interpreter, and a wrapper that exec\'d with "$@"', () => {
    const seen = [
      { start_time: "100", cmdline: "", argv: [WRAPPER, ...ARGS], exe: WRAPPER },
      { start_time: "100", cmdline: "", argv: ["/bin/sh", WRAPPER, ...ARGS], exe: "/usr/bin/dash" },
      {
        start_time: "100",
        cmdline: "",
        argv: ["/real/llama-server", "--log-x", ...ARGS],
        exe: "/real/llama-server",
      },
    ];
    for (const now of seen) expect(judgeLeftover(record, now, [WRAPPER], same)).toEqual({ verdict: "ours" });
  });

  test("where only a command string is known (ps): the same three, on word boundaries", () => {
    for (const cmdline of [
      `${WRAPPER} ${ARGS.join(" ")}`,
      `/bin/sh ${WRAPPER} ${ARGS.join(" ")}`,
      `/real/llama-server ${ARGS.join(" ")}`,
    ])
      expect(judgeLeftover(record, { start_time: "100", cmdline }, [WRAPPER], same).verdict).toBe("ours");
    const shifted = { start_time: "100", cmdline: `/real/llama-server ${ARGS.join(" ")}0` };
    expect(judgeLeftover(record, shifted, [WRAPPER], same).verdict).toBe("unexplained");
  });

  test("another start time: the pid was reused", () => {
    const now = { start_time: "101", cmdline: "", argv: [WRAPPER, ...ARGS], exe: WRAPPER };
    expect(judgeLeftover(record, now, [WRAPPER], same)).toEqual({ verdict: "pid_reused" });
  });

  test("a record naming a program this core does not run, or a process showing neither program nor arguments", () => {
    const now = { start_time: "100", cmdline: "", argv: [WRAPPER, ...ARGS], exe: WRAPPER };
    const other = judgeLeftover(record, now, ["/other/llama-server"], same);
    expect(other).toMatchObject({ verdict: "unexplained" });
    expect((other as { reason: string }).reason).toContain("not configured");
    const sleep = { start_time: "100", cmdline: "sleep 30", argv: ["sleep", "30"], exe: "/usr/bin/sleep" };
    expect(judgeLeftover(record, sleep, [WRAPPER], same).verdict).toBe("unexplained");
    // Arguments alone are not enough when none were recorded, and argv[0] is not an argument.
    expect(judgeLeftover({ ...record, argv: [] }, sleep, [WRAPPER], same).verdict).toBe("unexplained");
    const onlyArgs = { start_time: "100", cmdline: "", argv: ["-m", "x"] };
    expect(judgeLeftover({ ...record, argv: ["-m", "x"] }, onlyArgs, [WRAPPER], same).verdict).toBe(
      "unexplained",
    );
  });

  test("an older record (no binary, no argv) is judged against the configured programs by the process alone", () => {
    const old = { start_time: "100" };
    const own = { start_time: "100", cmdline: "", argv: [WRAPPER, ...ARGS], exe: WRAPPER };
    const exec = {
      start_time: "100",
      cmdline: "",
      argv: ["/real/llama-server", ...ARGS],
      exe: "/real/llama-server",
    };
    expect(judgeLeftover(old, own, [WRAPPER], same).verdict).toBe("ours");
    expect(judgeLeftover(old, exec, [WRAPPER], same).verdict).toBe("unexplained");
  });

  test("bare command names (an MCP server's `npx`) compare as written", () => {
    const now = { start_time: "7", cmdline: "", argv: ["npx", "-y", "srv"] };
    expect(
      judgeLeftover({ start_time: "7", binary: "npx", argv: ["-y", "srv"] }, now, ["npx"], same).verdict,
    ).toBe("ours");
  });

  test("a bare name is shown by a path to a file of that name (the MCP guard runs the path it found)", () => {
    const record = { start_time: "7", binary: "srv", argv: [] };
    const at = (argv0: string) => ({ start_time: "7", cmdline: argv0, argv: [argv0] });
    expect(judgeLeftover(record, at("/usr/local/bin/srv"), ["srv"], same).verdict).toBe("ours");
    for (const other of ["/usr/local/bin/srv2", "/usr/local/bin/xsrv", "/srv/other"])
      expect(judgeLeftover(record, at(other), ["srv"], same).verdict).toBe("unexplained");
  });

  test("the reason, which the log shows, quotes no credential of the process's arguments", () => {
    // uvx exec'd the tool under its full path: the arguments no longer end as recorded.
    const record = { start_time: "9", binary: "uvx", argv: ["mcp-srv", "--api-key", "sk-live-4242abcd"] };
    const now = {
      start_time: "9",
      cmdline:
        "/home/u/.cache/uv/bin/python /home/u/.cache/uv/bin/mcp-srv --api-key sk-live-4242abcd --token=tok-9876zz",
      argv: [
        "/home/u/.cache/uv/bin/python",
        "/home/u/.cache/uv/bin/mcp-srv",
        "--api-key",
        "sk-live-4242abcd",
        "--token=tok-9876zz",
      ],
    };
    const v = judgeLeftover(record, now, ["uvx"], same);
    expect(v.verdict).toBe("unexplained");
    const reason = (v as { reason: string }).reason;
    expect(reason).toContain("--api-key");
    expect(reason).not.toContain("sk-live-4242abcd");
    expect(reason).not.toContain("tok-9876zz");
  });
  test("a short value after a secret-named flag is hidden where it stands, not everywhere it occurs", () => {
    const argv = [
      "/usr/bin/python",
      "/opt/mcp-srv",
      "--auth-timeout",
      "30",
      "--port",
      "3030",
      "--pwd",
      "dact",
    ];
    const record = { start_time: "9", binary: "uvx", argv: argv.slice(1, -2) };
    const now = { start_time: "9", cmdline: argv.join(" "), argv };
    const v = judgeLeftover(record, now, ["uvx"], same);
    const reason = (v as { reason: string }).reason;
    expect(reason).toContain("--auth-timeout [redacted] --port 3030 --pwd [redacted]`");
  });

  test("a secret that is part of the marker leaves the markers already written as they are", () => {
    const argv = ["/usr/bin/node", "/opt/srv.js", "--api-key", "sk-live-4242abcd", "--password=dacted"];
    const record = { start_time: "9", binary: "npx", argv: argv.slice(1, -1) };
    const now = { start_time: "9", cmdline: argv.join(" "), argv };
    const reason = (judgeLeftover(record, now, ["npx"], same) as { reason: string }).reason;
    expect(reason).toContain("/opt/srv.js --api-key [redacted] --password=[redacted]`");
  });

  test("a URL's query credential is not quoted as the argument wrote it (URL-encoded) either", () => {
    const url = "https://mcp.example/sse?access_token=AbCd%2FeFgH%2BiJkL%3D";
    const record = { start_time: "9", binary: "npx", argv: ["mcp-remote", url] };
    const now = {
      start_time: "9",
      cmdline: `/usr/bin/node /opt/mcp-remote/cli.js ${url}`,
      argv: ["/usr/bin/node", "/opt/mcp-remote/cli.js", url],
    };
    const v = judgeLeftover(record, now, ["npx"], same);
    expect(v.verdict).toBe("unexplained");
    const reason = (v as { reason: string }).reason;
    expect(reason).toContain("access_token=[redacted]");
    expect(reason).not.toContain("AbCd");
  });

  test("a short URL password, a token as a URL's user and a short query credential are hidden where they stand", () => {
    const args = [
      "mcp-remote",
      "https://u:pw12@mcp.example/sse",
      "https://ghp1@git.example/x?key=k9&port=3030",
    ];
    const record = { start_time: "9", binary: "npx", argv: args };
    const now = {
      start_time: "9",
      cmdline: `/usr/bin/node /opt/mcp-remote/cli.js ${args.slice(1).join(" ")}`,
      argv: ["/usr/bin/node", "/opt/mcp-remote/cli.js", ...args.slice(1)],
    };
    const reason = (judgeLeftover(record, now, ["npx"], same) as { reason: string }).reason;
    expect(reason).toContain(
      "https://[redacted]@mcp.example/sse https://[redacted]@git.example/x?key=[redacted]&port=3030",
    );
    for (const secret of ["pw12", "ghp1", "k9&"]) expect(reason).not.toContain(secret);
  });
});
