import { expect, test } from "bun:test";
import { parseConfigText } from "../../src/config/load.ts";
import { coreErrorOf } from "../fixtures/core-error.ts";

// A line over stdio.max_line_bytes is answered `line_too_long` with no id (docs/protocol.md):
// `max_line_bytes: 8` (meant as MiB) refused every request, `ping` and `cancel` included
// (`{"id":1,"method":"ping"}` is 24 bytes), with a message that named no key, while doctor
// called the config valid.
test("stdio.max_line_bytes below a KiB is config_invalid naming the key; a KiB is taken", () => {
  const err = coreErrorOf(() => parseConfigText("stdio:\n  max_line_bytes: 8\n", "/c/config.yaml"));
  expect(err).toMatchObject({ code: "config_invalid", data: { key: "stdio.max_line_bytes", line: 2 } });
  expect(err.message).toContain("at least 1024");
  expect(
    parseConfigText("stdio:\n  max_line_bytes: 1024\n", "/c/config.yaml").config.stdio.max_line_bytes,
  ).toBe(1024);
});
