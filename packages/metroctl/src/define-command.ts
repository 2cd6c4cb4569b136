/**
 * How the command table adds commands: `define(name, action)` creates the
 * commander subcommand and wires the parts every command shares — the
 * CommandContext built from the global flags, the exit code, and failures
 * (from the action or from commander's own parsing) tagged with the
 * command's name for the one-line error report.
 *
 * This module is on the path of every run, `--help` included, so it loads
 * nothing heavy: the CommandContext (config dir, endpoints: x509 and the
 * curator's client) is loaded when a command that talks to a cluster runs,
 * and `defineLocal` adds commands that need only the run's I/O
 * (`completion`, `version`) and never load it.
 */
import { Command, CommanderError } from "commander";
import type { CommandContext, GlobalOptions } from "./command-context";
import { CommandFailedError } from "./errors";
import type { MetroctlIo } from "./io";

/** A command's action: resolves to its exit code (default 0). */
export type CommandAction<Opts> = (
  ctx: CommandContext,
  args: string[],
  opts: Opts,
) => Promise<number | void>;

/** The action of a command that needs only the run's I/O: resolves to its exit code (default 0). */
export type LocalAction<Opts> = (
  io: MetroctlIo,
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

/** Like {@link DefineCommand}, for a command that needs no CommandContext. */
export type DefineLocalCommand = <Opts = Record<string, never>>(
  name: string,
  action: LocalAction<Opts>,
) => Command;

/** Both ways to add a command to one program. */
export interface CommandDefiners {
  define: DefineCommand;
  defineLocal: DefineLocalCommand;
}

/** Commander's collector of a repeatable option. */
export const collectValues = (value: string, previous: string[]): string[] => [...previous, value];

/** The outcome of a parse: set by whichever action ran. */
export interface RunOutcome {
  exitCode: number;
}

/** The positional arguments commander parsed for `command`, without the ones left out. */
function givenArguments(command: Command): string[] {
  const values: unknown[] = command.processedArgs.flat();
  return values.filter((a): a is string => typeof a === "string");
}

/** The definers adding to `program`, recording exit codes into `outcome`. */
export function commandDefiners(
  program: Command,
  io: MetroctlIo,
  outcome: RunOutcome,
): CommandDefiners {
  const add = (name: string, run: (self: Command) => Promise<number | void>): Command => {
    const words = name.split(" ");
    const parent = words.length === 2 ? commandGroup(program, words[0]) : program;
    const command = parent.command(words[words.length - 1]);
    command.exitOverride((e: CommanderError) => {
      throw e.exitCode === 0 ? e : new CommandFailedError(name, e);
    });
    // Commander passes the command itself last; it is `command`.
    command.action(async () => {
      try {
        outcome.exitCode = (await run(command)) ?? 0;
      } catch (e) {
        throw new CommandFailedError(name, e);
      }
    });
    return command;
  };
  const define: DefineCommand = <Opts>(name: string, action: CommandAction<Opts>) =>
    add(name, async (self) => {
      const { CommandContext } = await import("./command-context.js");
      const ctx = new CommandContext(io, program.opts<GlobalOptions>());
      return action(ctx, givenArguments(self), self.opts<Opts & object>());
    });
  const defineLocal: DefineLocalCommand = <Opts>(name: string, action: LocalAction<Opts>) =>
    add(name, (self) => action(io, givenArguments(self), self.opts<Opts & object>()));
  return { define, defineLocal };
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
