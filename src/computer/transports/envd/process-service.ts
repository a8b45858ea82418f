/**
 * envd's `process.Process` service on Hangar's processes (processes.ts): the request checks and
 * the events of the streams. `Start` and `Connect` stream a start event, the output, keep-alives
 * (every `Keepalive-Ping-Interval` seconds without output, as the SDK asks) and the end. A stream
 * the client leaves does not stop the process; the request's timeout (`Connect-Timeout-Ms`) does,
 * as in envd.
 */
import type { MessageInitShape } from "@bufbuild/protobuf";
import { Code, ConnectError, type HandlerContext, type ServiceImpl } from "@connectrpc/connect";
import type { EnvdState } from "./envd-state.js";
import {
  type Process,
  type ProcessEventSchema,
  type ProcessInput,
  type ProcessSelector,
  Signal,
} from "./gen/process/process_pb.js";
import { keepAliveMs } from "./keepalive.js";
import type { EnvdProcess, EnvdProcesses, ProcessOutput } from "./processes.js";

/** The largest terminal, in columns or rows. */
const MAX_PTY_SIZE = 1000;

type EventInit = MessageInitShape<typeof ProcessEventSchema>;

export function processService(state: EnvdState, processes: EnvdProcesses): ServiceImpl<typeof Process> {
  return {
    list() {
      return {
        processes: processes.list().map((proc) => ({ pid: proc.pid, tag: proc.tag, config: proc.config })),
      };
    },

    async *start(req, ctx) {
      state.checkUser(state.userOfHeader(ctx.requestHeader.get("authorization")));
      const config = req.process;
      if (!config?.cmd) throw new ConnectError("process.cmd is required", Code.InvalidArgument);
      checkConfig(config);
      const size = req.pty?.size;
      if (req.pty && !(size && validSize(size.cols) && validSize(size.rows))) {
        throw new ConnectError(
          `pty.size: cols and rows must be from 1 to ${MAX_PTY_SIZE}`,
          Code.InvalidArgument,
        );
      }
      const proc = processes.start({
        cmd: config.cmd,
        args: config.args,
        envs: config.envs,
        cwd: state.resolve(config.cwd ?? ""),
        tag: req.tag,
        // Unset means a pipe, as older clients expect; the SDK says false unless it wants one.
        stdin: req.stdin ?? true,
        pty: req.pty && size ? { cols: size.cols, rows: size.rows } : undefined,
        timeoutMs: ctx.timeoutMs() ?? 0,
        baseEnv: state.envVars,
      });
      yield* events(proc, ctx);
    },

    async *connect(req, ctx) {
      yield* events(processes.find(selectorOf(req.process), true), ctx);
    },

    update(req) {
      const proc = processes.find(selectorOf(req.process));
      const size = req.pty?.size;
      if (req.pty) {
        if (!(size && validSize(size.cols) && validSize(size.rows))) {
          throw new ConnectError(
            `pty.size: cols and rows must be from 1 to ${MAX_PTY_SIZE}`,
            Code.InvalidArgument,
          );
        }
        proc.controls.resize(size.cols, size.rows);
      }
      return {};
    },

    async streamInput(requests) {
      let proc: EnvdProcess | undefined;
      for await (const req of requests) {
        const event = req.event;
        if (event.case === "start") proc = processes.find(selectorOf(event.value.process));
        else if (event.case === "data") {
          if (!proc)
            throw new ConnectError("the first event must name the process (start)", Code.InvalidArgument);
          write(proc, event.value.input);
        } else if (event.case !== "keepalive") {
          throw new ConnectError("an input event must be start, data or keepalive", Code.InvalidArgument);
        }
      }
      return {};
    },

    sendInput(req) {
      write(processes.find(selectorOf(req.process)), req.input);
      return {};
    },

    sendSignal(req) {
      const proc = processes.find(selectorOf(req.process));
      const signal =
        req.signal === Signal.SIGKILL ? "SIGKILL" : req.signal === Signal.SIGTERM ? "SIGTERM" : undefined;
      if (!signal)
        throw new ConnectError(`invalid signal: ${req.signal} (SIGTERM or SIGKILL)`, Code.Unimplemented);
      processes.signal(proc, signal);
      return {};
    },

    closeStdin(req) {
      processes.find(selectorOf(req.process)).controls.closeStdin();
      return {};
    },
  };
}

/**
 * A process as a stream's messages: its start, what it wrote (what is kept first), keep-alives, its
 * end; until the end, or until the client leaves.
 */
async function* events(proc: EnvdProcess, ctx: HandlerContext) {
  // Subscribed before the first message goes out: no output falls between.
  const sub = proc.subscribe();
  try {
    yield { event: { event: { case: "start" as const, value: { pid: proc.pid } } } };
    const interval = keepAliveMs(ctx);
    for (;;) {
      const output = await sub.next(interval, ctx.signal);
      yield { event: eventOf(output) };
      if (output.type === "end") return;
    }
  } finally {
    sub.close();
  }
}

function eventOf(output: ProcessOutput): EventInit {
  if (output.type === "keepalive") return { event: { case: "keepalive", value: {} } };
  if (output.type === "end") return { event: { case: "end", value: output.ending } };
  return { event: { case: "data", value: { output: { case: output.stream, value: output.data } } } };
}

function write(proc: EnvdProcess, input: ProcessInput | undefined) {
  const data = input?.input;
  if (data?.case === "stdin") proc.controls.writeStdin(Buffer.from(data.value));
  else if (data?.case === "pty") proc.controls.writePty(Buffer.from(data.value));
  else throw new ConnectError("input must be stdin or pty bytes", Code.InvalidArgument);
}

function selectorOf(process: ProcessSelector | undefined): { pid?: number; tag?: string } {
  const selector = process?.selector;
  if (selector?.case === "pid") return { pid: selector.value };
  if (selector?.case === "tag") return { tag: selector.value };
  throw new ConnectError("process: give a pid or a tag", Code.InvalidArgument);
}

/** What no process can be given: a NUL byte in its command, arguments, directory or variables, an `=` in a variable's name. */
function checkConfig(config: { cmd: string; args: string[]; envs: Record<string, string>; cwd?: string }) {
  const words: [string, string][] = [
    ["process.cmd", config.cmd],
    ...config.args.map((arg, i): [string, string] => [`process.args[${i}]`, arg]),
    ["process.cwd", config.cwd ?? ""],
  ];
  for (const [where, word] of words) {
    if (word.includes("\0")) throw new ConnectError(`${where}: contains a NUL byte`, Code.InvalidArgument);
  }
  for (const [name, value] of Object.entries(config.envs)) {
    if (name === "" || name.includes("=") || name.includes("\0") || value.includes("\0")) {
      throw new ConnectError(
        `process.envs: '${name.replaceAll("\0", "\\0")}' is not a variable (no '=' or NUL byte, not empty)`,
        Code.InvalidArgument,
      );
    }
  }
}

function validSize(value: number): boolean {
  return Number.isInteger(value) && value >= 1 && value <= MAX_PTY_SIZE;
}
