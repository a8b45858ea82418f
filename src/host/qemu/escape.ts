/** QEMU's option syntax splits on commas; a literal comma in a value is written twice. */
export function qemuValue(value: string): string {
  return value.replaceAll(",", ",,");
}
