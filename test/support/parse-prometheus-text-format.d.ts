declare module "parse-prometheus-text-format" {
  /** The metric families of a Prometheus text exposition. */
  export default function parse(text: string): unknown[];
}
