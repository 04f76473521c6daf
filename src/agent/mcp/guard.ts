import { guardShellAvailable, guardShellLaunch } from "../../platform/guard-shell.ts";

/**
 * An MCP server must not outlive the core, even one that ignores stdin's end and SIGTERM, and
 * even when the core is SIGKILLed and can do nothing more. So on POSIX each server is started
 * through this guard: `/bin/sh -c GUARD local-ai-mcp-guard <DYLD_*=…> -- <path> <args…>` (the
 * config's DYLD_* and the absolute path as platform/guard-shell.ts says) in a new session
 * (Bun's `detached`, a setsid), so the server and whatever it starts share one process group.
 * The shell forks a watcher, then `exec`s the server: the server keeps the spawned pid (its
 * pid record, and `$$` in the watcher) and fds 0–2 untouched, and gets no fd 3. The watcher
 * holds fd 3, a socket whose other end only the core holds, and reads it until EOF, which comes
 * when the core closes it (the server has exited) or dies, however. Then it gives the server
 * 0.5 s to exit on stdin's end, sends SIGTERM to the group, waits up to 2 s for the server, gives
 * the rest of the group 0.2 s, and sends SIGKILL to the group, itself included. A timer caps all
 * of that at 3 s, since each `sleep` of the polling is a fork that a loaded machine makes slow.
 * The core writes `pid:start` lines to fd 3 for what it saw the server start outside its group
 * (child.ts `noteEscaped`); the watcher keeps them (digits and colons only) until the EOF, those
 * still running only (`GUARD_KEEP`).
 * On Linux, then, while the server lives (the core's death is its stdin's end too), the watcher
 * walks the server's descendants through /proc/<pid>/task/<tid>/children (only its tree is read, at
 * most 256) and notes each outside the group (a browser launched with setsid) with its start
 * time; those get the group's SIGTERM and SIGKILL (`esc`), each only while its start time is the
 * one noted (a pid reused since is not theirs). Only simple commands carry a redirection that
 * may fail (a process gone meanwhile): a shell may exit on a compound command's.
 * The watcher ignores SIGTERM (it must live to send the SIGKILL) and lets go of the protocol
 * pipes at once, so their ends are the server's alone. A shell costs a few milliseconds and no
 * memory to speak of; a guard in the core's own binary would cost a Bun runtime per server.
 */
/**
 * The watcher's list of escaped processes, `out`: a line told is added (`add`), and once the list reaches
 * `cap` it keeps only the processes still running as noted, `cap` then twice what it kept (256 at
 * least). Kept whole, a server that goes on starting short-lived processes outside its group grew
 * it for as long as it ran, and each addition copies the whole string in a POSIX shell: 50,000
 * lines took the watcher's shell over a minute of CPU. Exported for its own test.
 */
export const GUARD_KEEP = `out=; m=0; cap=256
keep() { k=; m=0; for e in $out; do l=; read -r l <"/proc/\${e%%:*}/stat" || continue; set -f; set -- \${l##*) }; set +f; [ "\${20}" = "\${e#*:}" ] && k="$k $e" && m=$((m+1)); done; out=$k; cap=$((m*2)); [ $cap -ge 256 ] || cap=256; }
add() { out="$out $1"; m=$((m+1)); [ $m -lt $cap ] || keep; }`;

const GUARD_SCRIPT = `(
trap '' TERM HUP INT
exec </dev/null >/dev/null 2>&1
${GUARD_KEEP}
while read -r e <&3; do case "$e" in *[!0-9:]*|"") ;; *) add "$e";; esac; done
if [ -r /proc/$$/task/$$/children ] && kill -0 $$; then
  todo=$$; seen=" $$ "; n=0
  while [ -n "$todo" ]; do
    next=
    for p in $todo; do
      for c in /proc/$p/task/*/children; do
        k=; read -r k <"$c"
        for q in $k; do
          case "$seen" in *" $q "*) continue;; esac
          n=$((n+1)); [ $n -le 256 ] || continue
          seen="$seen$q "; next="$next $q"
          l=; read -r l <"/proc/$q/stat" || continue
          set -f; set -- \${l##*) }; set +f
          [ "$3" = "$$" ] || out="$out $q:\${20}"
        done
      done
    done
    todo=$next
  done
fi
esc() { for e in $out; do l=; read -r l <"/proc/\${e%%:*}/stat" || continue; set -f; set -- \${l##*) }; set +f; [ "\${20}" = "\${e#*:}" ] && kill -$s "\${e%%:*}"; done; }
(sleep 3; s=KILL; esc; kill -KILL 0) &
n=0; while [ $n -lt 5 ] && kill -0 $$; do sleep 0.1; n=$((n+1)); done
kill -TERM 0; s=TERM; esc
n=0; while [ $n -lt 20 ] && kill -0 $$; do sleep 0.1; n=$((n+1)); done
sleep 0.2
s=KILL; esc
kill -KILL 0
) &
exec 3<&-
exec "$@"`;

/** What the guard shows as its name ($0) in `ps`. */
const GUARD_NAME = "local-ai-mcp-guard";

/** The guard exists where there is a POSIX shell; elsewhere (Windows) servers run unguarded. */
export function guardAvailable(platform: NodeJS.Platform = process.platform): boolean {
  return guardShellAvailable(platform);
}

/**
 * The argv and environment that run `path args…` with `env` under the guard; it expects fd 3 to
 * be the core's socket. `path` is absolute (child.ts `guardedCommand`), and the config's DYLD_*
 * travel as arguments, not through the shell's environment (platform/guard-shell.ts: SIP).
 */
export function guardedLaunch(
  path: string,
  args: readonly string[],
  env: Readonly<Record<string, string>>,
): { argv: string[]; env: Record<string, string> } {
  return guardShellLaunch(GUARD_SCRIPT, GUARD_NAME, path, args, env);
}
