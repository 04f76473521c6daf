import { z } from "zod";
import { SafeIdSchema } from "./safe-id.ts";

/**
 * The params of the methods that read, write or erase a user's data (`chat`, `sessions.*`,
 * `users.delete`, `documents.*`; docs/protocol.md "Errors"). Their user is a default, so a key
 * they do not know is refused (`invalid_request` naming it), never stripped: a misspelled
 * `user_id` (`userId`, as JavaScript spells it) would otherwise read, fill or erase the default
 * user's conversations and documents for another user.
 */
export const UserIdSchema = SafeIdSchema.default("default_user");

/** A user-data method's params object: strict at the top (nested JSON Schema bodies stay open). */
export const userParams = <S extends z.ZodRawShape>(shape: S) => z.object(shape).strict();
