// A core stand-in for the kill -9 tests: starts a supervisor in argv[2], says which child it
// started, then waits to be killed outright. FAKE_LLAMA_* knobs in its environment go to the
// stand-in (FAKE_LLAMA_NO_CHILD_MODE=1: a build whose child outlives its core).
import { fakeLlamaKnobs } from "../../fixtures/llama-stand-in/binary.ts";
import { makeSupervisor } from "./harness.ts";

const dir = process.argv[2] as string;
const { supervisor } = makeSupervisor(dir, { env: fakeLlamaKnobs(process.env) });
const lease = await supervisor.acquire(new AbortController().signal);
lease.release();
process.stdout.write(`READY ${supervisor.pid()}\n`);
setInterval(() => {}, 1000);
