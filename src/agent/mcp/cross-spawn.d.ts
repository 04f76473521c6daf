// The one part of cross-spawn (a dependency of the MCP SDK, and of the core for this) the core
// calls: its command parser, which turns a command and its arguments into what Windows can run.
declare module "cross-spawn" {
  interface Parsed {
    command: string;
    args: string[];
    options: { windowsVerbatimArguments?: boolean };
    /** The resolved command file (Windows only). */
    file?: string;
  }
  const crossSpawn: {
    _parse(command: string, args: string[], options: { env?: Record<string, string>; cwd?: string }): Parsed;
  };
  export default crossSpawn;
}
