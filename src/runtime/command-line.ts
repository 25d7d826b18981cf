/**
 * A command line cut into its arguments by Node's own util.parseArgs (in
 * its `tokens` form, non-strict, so each command keeps its own words for a
 * mistake): `--name=value` and `--name value` alike, short flags, a flag
 * that takes a value taking the next argument whatever it is. Each command
 * then reads the arguments in order (runtime/flags.ts, memcached's
 * options, cli.ts's report and diff, the bench driver) and refuses in its
 * words: `X needs a value`, an unknown flag. Node 20.0 has everything used
 * here (parseArgs from 18.3, `tokens` from 18.7; its tokens for these
 * command lines compared equal on 20.0.0 and 20.20).
 */
import { parseArgs } from "node:util";

/** The flags a command knows, as written (`--out`, `-o`), and whether each takes a value. */
export type FlagTable = Readonly<Record<string, "value" | "switch">>;

/** One argument, or one letter of a cluster of short flags (`-vMp11211`). */
export interface Arg {
  /** The argument as written (`--port=11211`; each letter of a cluster has the whole cluster). */
  readonly arg: string;
  /** `--port`, `-p`; an operand, and a short flag not written alone where clusters are not read, as written (`FILE`, `-`, `-oOUT`). */
  readonly flag: string;
  /** Not a flag: an operand (`FILE`, `64K`, `-`). */
  readonly operand: boolean;
  /** Written with one dash: a letter (`-p`, or the `p` of `-vMp11211`). */
  readonly short: boolean;
  /** The value written in the argument: after "=" (`--port=11211`), or attached to a letter (`-p11211`). */
  readonly inline: string | undefined;
  /** A flag that takes a value: `inline`, else the next argument (taken, whatever it is); undefined when there is none. */
  readonly value: string | undefined;
  /** Where it is in argv. */
  readonly index: number;
}

/** `--name=value` -> ["--name", "value"]; `--name` -> ["--name", undefined]. */
export function splitFlag(arg: string): [name: string, inline: string | undefined] {
  const eq = arg.startsWith("--") ? arg.indexOf("=") : -1;
  return eq > 0 ? [arg.slice(0, eq), arg.slice(eq + 1)] : [arg, undefined];
}

/**
 * `argv`'s arguments in order. `clusters`: short flags are read getopt's
 * way (`-vv`, `-p11211`, `-vp 11211`: memcached's options); without it a
 * short flag is known only written alone (`-o OUT`; `-oOUT` comes back as
 * one unknown flag `-oOUT`). `--` comes back as a flag named `--` and ends
 * the reading: no command here takes operands after it, each refuses it
 * as an unknown flag.
 */
export function readArgs(argv: readonly string[], table: FlagTable, clusters = false): Arg[] {
  const options: Record<string, { type: "string" | "boolean" }> = {};
  for (const [flag, kind] of Object.entries(table)) options[flag.replace(/^--?/, "")] = { type: kind === "value" ? "string" : "boolean" };
  const { tokens } = parseArgs({ args: [...argv], options, strict: false, allowPositionals: true, tokens: true });
  const args: Arg[] = [];
  let whole = -1; // the argument already returned whole (an unknown cluster): its other letters are skipped
  for (const t of tokens) {
    if (t.index === whole) continue;
    const arg = argv[t.index]!;
    if (t.kind === "positional") {
      args.push({ arg, flag: arg, operand: true, short: false, inline: undefined, value: undefined, index: t.index });
    } else if (t.kind === "option-terminator") {
      // parseArgs reads a "-" inside a cluster (`-M-`) as `--`, and numbers
      // the arguments after it wrongly: getopt's invalid letter "-", and
      // nothing after it read, as after a real `--`.
      args.push({ arg, flag: "--", operand: false, short: arg !== "--", inline: undefined, value: undefined, index: t.index });
      break;
    } else if (t.rawName.startsWith("--")) {
      const [flag, inline] = splitFlag(arg);
      args.push({ arg, flag, operand: false, short: false, inline, value: table[flag] === "value" ? t.value : undefined, index: t.index });
    } else if (clusters || arg === t.rawName) {
      const inline = t.inlineValue === true ? t.value : undefined;
      args.push({ arg, flag: t.rawName, operand: false, short: true, inline, value: table[t.rawName] === "value" ? t.value : undefined, index: t.index });
    } else {
      whole = t.index;
      args.push({ arg, flag: arg, operand: false, short: true, inline: undefined, value: undefined, index: t.index });
    }
  }
  return args;
}
