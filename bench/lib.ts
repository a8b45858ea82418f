/**
 * What every benchmark shares: time a function many times and print a table of median and p95.
 * Benchmarks print figures; they do not pass or fail.
 */
import { availableParallelism, loadavg } from "node:os";

export interface Row {
  name: string;
  median: string;
  p95: string;
  target?: string;
  note?: string;
}

/**
 * Runs `fn` `warmup` times untimed, then `runs` times; the times of those (ms). An untimed `setup`
 * goes before each run (e.g. to change the screen).
 */
export async function sample(
  runs: number,
  fn: () => Promise<unknown>,
  options: { warmup?: number; setup?: () => Promise<unknown> } = {},
): Promise<number[]> {
  const warmup = options.warmup ?? 3;
  const samples: number[] = [];
  for (let i = 0; i < warmup + runs; i++) {
    await options.setup?.();
    const start = performance.now();
    await fn();
    if (i >= warmup) samples.push(performance.now() - start);
  }
  return samples;
}

/** Runs `fn` `warmup` times untimed, then `runs` times, and returns the row in milliseconds. */
export async function timeIt(
  name: string,
  fn: () => Promise<unknown>,
  options: { runs?: number; warmup?: number; target?: string; note?: string } = {},
): Promise<Row> {
  const samples = await sample(options.runs ?? 50, fn, { warmup: options.warmup ?? 5 });
  return { name, ...summarize(samples), target: options.target, note: options.note };
}

export function summarize(samples: number[], unit = "ms", digits = 2) {
  const sorted = [...samples].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
  return { median: `${at(0.5).toFixed(digits)} ${unit}`, p95: `${at(0.95).toFixed(digits)} ${unit}` };
}

/** The median of some samples. */
export const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** Rates of some rounds (higher is better) as a row's cells: the median, and the slowest as its "p95". */
export function summarizeRates(rates: number[], unit = "MB/s") {
  return {
    median: `${Math.round(median(rates))} ${unit}`,
    p95: `${Math.round(Math.min(...rates))} ${unit} (slowest)`,
  };
}
/** Their 95th percentile. */
export const p95 = (xs: number[]) =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * 0.95))];
/** Milliseconds as a table shows them. */
export const ms = (x: number) => `${x.toFixed(2)} ms`;

/** The machine's load when a table was taken: figures on a loaded machine are not comparable. */
export function machineLoad(): string {
  const [one, five, fifteen] = loadavg().map((x) => x.toFixed(2));
  return `load average ${one}, ${five}, ${fifteen} on ${availableParallelism()} CPUs`;
}

/** Prints rows as a Markdown table, ready to paste into the README, with the machine's load under it. */
export function printTable(title: string, rows: Row[]) {
  printMarkdown(
    title,
    ["what", "median", "p95", "target", "note"],
    rows.map((r) => [r.name, r.median, r.p95, r.target ?? "", r.note ?? ""]),
  );
}

export function printMarkdown(title: string, header: string[], cells: string[][]) {
  const lines = [
    `\n### ${title}\n`,
    `| ${header.join(" | ")} |`,
    `|${header.map(() => "---").join("|")}|`,
    ...cells.map((row) => `| ${row.join(" | ")} |`),
    `\n(${machineLoad()})`,
  ];
  console.log(lines.join("\n"));
}
