/**
 * How command groups add their commands: `define(name, action)` creates the
 * commander subcommand and wires the parts every command shares — the
 * CommandContext built from the global flags, the exit code, and failures
 * (from the action or from commander's own parsing) tagged with the
 * command's name for the one-line error report.
 */
import { Command, CommanderError } from "commander";
import { CommandContext, type GlobalOptions } from "./command-context";
import { CommandFailedError } from "./errors";
import type { MetroctlIo } from "./io";

/** A command's action: resolves to its exit code (default 0). */
export type CommandAction<Opts> = (
  ctx: CommandContext,
  args: string[],
  opts: Opts,
) => Promise<number | void>;

/**
 * Adds a subcommand `name` running `action`; returns it for arguments,
 * options and description. A name of two words (`node describe`) adds
 * `describe` under the group `node`, created on first use and shared by
 * every command of the group.
 */
export type DefineCommand = <Opts = Record<string, never>>(
  name: string,
  action: CommandAction<Opts>,
) => Command;

/** Commander's collector of a repeatable option. */
export const collectValues = (value: string, previous: string[]): string[] => [...previous, value];

/** The outcome of a parse: set by whichever action ran. */
export interface RunOutcome {
  exitCode: number;
}

/** A {@link DefineCommand} adding to `program`, recording exit codes into `outcome`. */
export function commandDefiner(
  program: Command,
  io: MetroctlIo,
  outcome: RunOutcome,
): DefineCommand {
  return <Opts>(name: string, action: CommandAction<Opts>) => {
    const words = name.split(" ");
    const parent = words.length === 2 ? commandGroup(program, words[0]) : program;
    const command = parent.command(words[words.length - 1]);
    command.exitOverride((e: CommanderError) => {
      throw e.exitCode === 0 ? e : new CommandFailedError(name, e);
    });
    command.action(async (...params: unknown[]) => {
      const self = params[params.length - 1] as Command;
      try {
        const ctx = new CommandContext(io, program.opts<GlobalOptions>());
        const args = self.processedArgs.flat().filter((a): a is string => a !== undefined);
        outcome.exitCode = (await action(ctx, args, self.opts<Opts & object>())) ?? 0;
      } catch (e) {
        throw new CommandFailedError(name, e);
      }
    });
    return command;
  };
}

/** The command group `name` of `program` (a command with subcommands only), created if needed. */
function commandGroup(program: Command, name: string): Command {
  const existing = program.commands.find((c) => c.name() === name);
  if (existing) return existing;
  const group = program.command(name).description(`${name} commands`);
  group.exitOverride((e: CommanderError) => {
    throw e.exitCode === 0 ? e : new CommandFailedError(name, e);
  });
  return group;
}
