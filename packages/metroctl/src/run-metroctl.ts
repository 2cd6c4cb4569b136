/**
 * The programmatic entry: parses argv with commander, runs the command, and
 * turns every failure into one line on stderr and an exit code:
 *
 *   metroctl: <command>: <STATUS>: <details>   (the cluster refused, gRPC status)
 *   metroctl: <command>: <message>             (bad flag, config file, timeout, …)
 *
 * Exit codes: 0 success (and --help), 1 failure, 130 interrupted.
 *
 * What it loads itself is light (commander, the command table): each
 * command's code is loaded when it runs (see command-table.ts).
 */
import { Command, CommanderError } from "commander";
import { addCommands } from "./command-table";
import { commandDefiners, type RunOutcome } from "./define-command";
import { CommandFailedError } from "./errors";
import { describeFailure } from "./failure-message";
import { defaultDialTimeoutMs } from "./flag-defaults";
import { writeLine, type MetroctlIo } from "./io";

/** Builds the command tree for one run. Commander keeps parse state, so never reuse it. */
function buildProgram(io: MetroctlIo, outcome: RunOutcome): Command {
  const program = new Command("metroctl")
    .description("Operate a Metropolis cluster as its owner.")
    .option(
      "--config <dir>",
      "config dir: owner key and certificate, cluster CA, endpoints (default ~/.config/metroctl)",
    )
    .option(
      "--endpoints <host:port,...>",
      "curators to reach the cluster through (default port 7835); remembered once they work",
    )
    .option(
      "--dial-timeout <seconds>",
      `how long to try to reach the curator leader (default ${defaultDialTimeoutMs / 1000})`,
    )
    .exitOverride()
    .configureOutput({
      writeOut: (s) => io.stdout.write(s),
      writeErr: (s) => io.stderr.write(s),
      // Errors are reported once, as one line, by runMetroctl.
      outputError: () => undefined,
    });
  addCommands(program, commandDefiners(program, io, outcome));
  return program;
}

const oneLine = (text: string) => text.replace(/\s*\n\s*/g, " ").trim();

/**
 * Runs metroctl with `argv` (without node and script) against `io`; resolves
 * to the exit code. Never throws, never calls process.exit.
 */
export async function runMetroctl(argv: readonly string[], io: MetroctlIo): Promise<number> {
  const outcome: RunOutcome = { exitCode: 0 };
  const program = buildProgram(io, outcome);
  try {
    await program.parseAsync([...argv], { from: "user" });
    return outcome.exitCode;
  } catch (e) {
    if (e instanceof CommanderError && e.exitCode === 0) return 0; // --help, --version
    // Commander already printed the help when run without a command.
    if (e instanceof CommanderError && e.code === "commander.help") return e.exitCode;
    const [command, failure] =
      e instanceof CommandFailedError ? [e.command, e.error] : [undefined, e];
    if (failure instanceof CommanderError && failure.exitCode === 0) return 0;
    const [message, exitCode] = describeFailure(failure, io.signal);
    writeLine(io.stderr, oneLine(`metroctl: ${command ? `${command}: ` : ""}${message}`));
    return exitCode;
  }
}
