/**
 * A container's memory as its cgroup counts it, as `docker stats` shows it: the usage less the page
 * cache the kernel may drop (inactive file pages); 0 for a container that does not run (it holds
 * none). Asked of the engine's API on its socket.
 */
import { request } from "node:http";

interface Stats {
  memory_stats?: { usage?: number; stats?: Record<string, number> };
}

function get(socket: string, path: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath: socket, path }, (res) => {
      let body = "";
      res.setEncoding("utf8").on("data", (c: string) => {
        body += c;
      });
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on("error", reject);
    req.end();
  });
}

/** Bytes held by the container of desktop `name` (`hangar-<name>`). */
export async function cgroupMemory(socket: string, name: string): Promise<number> {
  const inspect = await get(socket, `/containers/hangar-${name}/json`);
  if (inspect.status !== 200) throw new Error(`no container for ${name}: ${inspect.body.slice(0, 200)}`);
  const state = (JSON.parse(inspect.body) as { State?: { Running?: boolean } }).State;
  if (!state?.Running) return 0;
  const stats = JSON.parse(
    (await get(socket, `/containers/hangar-${name}/stats?stream=false`)).body,
  ) as Stats;
  const { usage = 0, stats: detail = {} } = stats.memory_stats ?? {};
  return usage - (detail.total_inactive_file ?? detail.inactive_file ?? 0);
}
