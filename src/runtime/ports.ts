/**
 * A port that was free a moment ago on 127.0.0.1: bind port 0, read what the OS chose, close.
 * Another process may take it before llama-server binds; the supervisor then sees "couldn't
 * bind HTTP server socket" and asks again. (`--port 0` would avoid the race, but llama-server
 * logs its port only after the model has loaded, and readiness needs it before.)
 */
export async function pickFreePort(): Promise<number> {
  const server = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  const port = server.port;
  server.stop(true);
  return port;
}
