// A core stand-in killed before its llama-server is ready (reap.test.ts): llama.binary is a
// wrapper script that sleeps before it `exec`s the stand-in, as packaged installs often do. The
// stand-in is a build without child mode (it would otherwise exit on its own once loaded).
import { writeFileSync } from "node:fs";
import { FAKE_SERVER_SCRIPT } from "../../fixtures/llama-stand-in/binary.ts";
import { makeSupervisor } from "./harness.ts";

const dir = process.argv[2] as string;
const { supervisor, binary } = makeSupervisor(dir);
writeFileSync(
  binary,
  `#!/bin/sh\nexport FAKE_LLAMA_NO_CHILD_MODE=1\nsleep 0.5\nexec "${process.execPath}" "${FAKE_SERVER_SCRIPT}" "$@"\n`,
);
supervisor.acquire(new AbortController().signal).catch(() => {});
setInterval(() => {}, 1000);
