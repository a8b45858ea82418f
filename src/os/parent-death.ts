/**
 * Children that die with this process however it ends, `kill -9` included: on Linux a program is
 * started through util-linux's `setpriv --pdeathsig SIGNAL` (Debian's `util-linux`, essential), which
 * sets the kernel's parent-death signal and then execs the program, so its pid is the program's. The
 * kernel sends the signal when the thread that started it ends; Node starts children from its main
 * thread, so that is when this process ends.
 *
 * The command is left as it is where that cannot work: not Linux, no `setpriv`, or a program that is
 * not found (so that spawn's ENOENT error, which callers explain, stays). The signal is not inherited
 * across fork: a program's own children, and a program that daemonizes, are not covered.
 */
import { findProgram } from "./launch.js";

/** `[file, args]` to spawn so that the program gets `signal` when this process ends. */
export function withParentDeathSignal(
  file: string,
  args: readonly string[],
  signal: "KILL" | "TERM",
): [string, string[]] {
  if (process.platform !== "linux") return [file, [...args]];
  const setpriv = findProgram("setpriv");
  const program = findProgram(file);
  if (!setpriv || !program) return [file, [...args]];
  return [setpriv, [`--pdeathsig=${signal}`, "--", program, ...args]];
}
