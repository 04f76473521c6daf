import type { AgentConfig, Config } from "../../config/schema.ts";
import { CoreError } from "../../protocol/errors.ts";

/** The chat's agent: by name, else the first; the chat method asks first, for the agent's model. */
export function pickAgent(config: Config, name: string | undefined): AgentConfig {
  const agents = config.agents;
  if (name === undefined) return agents[0] as AgentConfig;
  const agent = agents.find((a) => a.name === name);
  if (!agent) {
    throw new CoreError(
      "invalid_request",
      `params.agent: no agent named '${name}' (known: ${agents.map((a) => a.name).join(", ")})`,
      {
        field: "agent",
      },
    );
  }
  return agent;
}
