// Drives a Hangar server with cua's published TypeScript client (@trycua/computer), unmodified:
// a subclass of its Computer only points `ip` at HANGAR_ADDRESS ("host:port"). With CUA_API_KEY set
// the client uses wss:// and the authenticate handshake. Prints one JSON line with what it saw.
process.env.CUA_TELEMETRY = "off";
const { Computer, OSType } = await import("@trycua/computer");

class HangarComputer extends Computer {
  get ip() {
    return process.env.HANGAR_ADDRESS;
  }
}

const computer = new HangarComputer({
  name: process.env.CUA_VM_NAME ?? "local",
  osType: OSType.LINUX,
  apiKey: process.env.CUA_API_KEY ?? "",
});
await computer.run();
const [stdout] = await computer.interface.runCommand("echo over-the-wire");
const path = `${process.env.HANGAR_DIR}/cloud.txt`;
await computer.interface.writeText(path, "héllo cloud");
const text = await computer.interface.readText(path);
await computer.disconnect();
process.stdout.write(`HANGAR_RESULT ${JSON.stringify({ stdout, text })}\n`);
process.exit(0);
