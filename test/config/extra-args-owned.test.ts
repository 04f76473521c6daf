import { describe, expect, test } from "bun:test";
import { parseConfigText } from "../../src/config/load.ts";
import { coreErrorOf } from "../fixtures/core-error.ts";

/**
 * Flags that change how llama-server answers the core itself: the core polls plain HTTP at
 * `/health` on loopback (docs/supervisor.md). llama-server puts every route under
 * `--api-prefix` (server-http.cpp: `srv->Get(path_prefix + path, …)`), so /health answered 404
 * until the start-up timeout ran out (120 s by default) and the start failed as too slow; with
 * `--ssl-key-file`/`--ssl-cert-file` it speaks TLS, which the core's HTTP reads as no answer.
 */
describe("extra_args flags that make llama-server unreachable by the core are config_invalid", () => {
  test.each([
    ["llama.extra_args.0", "llama:\n  extra_args: [--api-prefix, /v2]\n"],
    ["llama.extra_args.1", "llama:\n  extra_args: [--jinja, --api_prefix, /v2]\n"],
    ["llama.extra_args.0", "llama:\n  extra_args: [--api-prefix=/v2]\n"],
    ["llama.extra_args.0", "llama:\n  extra_args: [--ssl-key-file, /k.pem, --ssl-cert-file, /c.pem]\n"],
    ["llama.extra_args.0", "llama:\n  extra_args: [--ssl-cert-file, /c.pem]\n"],
    ["models.0.extra_args.0", "models:\n  - name: m\n    path: m.gguf\n    extra_args: [--api-prefix, /x]\n"],
  ])("%s is refused, naming the key and why", (key, text) => {
    const err = coreErrorOf(() => parseConfigText(text, "/c/config.yaml"));
    expect(err).toMatchObject({ code: "config_invalid", data: { key } });
    expect(err.message).toContain("the core talks to llama-server");
  });

  test("a value that merely looks like one after another flag's name is still the value's flag's", () => {
    const text = 'llama:\n  extra_args: ["--alias", "api-prefix", "--path", "/srv/www"]\n';
    expect(parseConfigText(text, "/c/config.yaml").config.llama.extra_args).toHaveLength(4);
  });
});
