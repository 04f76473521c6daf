// A core stand-in for the kill -9 test: starts a supervisor in argv[2], says which child it
// started, then waits to be killed outright.
import { makeSupervisor } from "./harness.ts";

const dir = process.argv[2] as string;
const { supervisor } = makeSupervisor(dir);
const lease = await supervisor.acquire(new AbortController().signal);
lease.release();
process.stdout.write(`READY ${supervisor.pid()}\n`);
setInterval(() => {}, 1000);
