/**
 * The routes that run programs and handle windows, with OSWorld's shapes and status codes:
 * `/execute` (and `/setup/execute`), `/execute_with_verification`, `/run_python`, `/run_bash_script`,
 * `/setup/launch`, `/setup/open_file`, `/setup/activate_window`, `/setup/close_window`,
 * `/window_size`; a command past its timeout has its whole process group killed.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { homedir, tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "../support/desktop.js";
import { descendants, waitUntilGone } from "../support/processes.js";
import { type OsworldDesktop, postJson, startOsworldDesktop } from "./support.js";

let desk: OsworldDesktop;
beforeAll(async () => {
  desk = await startOsworldDesktop();
}, 60_000);
afterAll(() => desk?.stop());

const post = (path: string, body: unknown) => postJson(desk.base, path, body);

describe("/execute", () => {
  it("runs an argument list and answers its output, errors and exit code (200 for any exit code)", async () => {
    for (const path of ["/execute", "/setup/execute"]) {
      const res = await post(path, { command: ["sh", "-c", "echo out; echo err >&2; exit 3"], shell: false });
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toMatch(/^application\/json/);
      expect(await res.json()).toEqual({ status: "success", output: "out\n", error: "err\n", returncode: 3 });
    }
  });

  it("splits a string like shlex without a shell, runs it with one with shell: true, and expands ~/", async () => {
    let res = await post("/execute", { command: "printf '%s|' 'a b' c ~/x" });
    expect((await res.json()).output).toBe(`a b|c|${homedir()}/x|`);
    res = await post("/execute", { command: "echo $((6*7)) | tr 4 X", shell: true });
    expect((await res.json()).output).toBe("X2\n");
  });

  it("answers 500 with subprocess's message for a program that is not there", async () => {
    const res = await post("/execute", { command: ["/nonexistent-bin"], shell: false });
    expect(res.status).toBe(500);
    expect(await res.json()).toEqual({
      status: "error",
      message: "[Errno 2] No such file or directory: '/nonexistent-bin'",
    });
  });

  it("refuses bodies that are not JSON objects and fields of the wrong type (400)", async () => {
    const noType = await fetch(`${desk.base}/execute`, { method: "POST", body: '{"command": ["true"]}' });
    expect(noType.status).toBe(400);
    expect(noType.headers.get("content-type")).toMatch(/^text\/html/);
    expect(await noType.text()).toMatch(/400 Bad Request/);
    const broken = await fetch(`${desk.base}/execute`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{not json",
    });
    expect(broken.status).toBe(400);
    const wrong = await post("/execute", { command: 5 });
    expect(wrong.status).toBe(400);
    expect(await wrong.text()).toMatch(/command must be a string or a list of strings/);
    expect((await post("/execute", { command: ["true"], shell: "yes" })).status).toBe(400);
    expect((await post("/execute", { command: "echo 'open" })).status).toBe(400);
  });

  it("kills the whole process group at the timeout and answers 500", async () => {
    const pidFile = join(desk.dir, "execute-child.pid");
    const started = Date.now();
    const res = await post("/execute", {
      command: ["sh", "-c", `sleep 60 & echo $! > ${pidFile}; wait`],
      shell: false,
      timeout: 1,
    });
    expect(res.status).toBe(500);
    const body = await res.json();
    expect(body.status).toBe("error");
    expect(body.message).toMatch(/timed out after 1 seconds/);
    expect(Date.now() - started).toBeLessThan(15_000);
    const pid = Number(readFileSync(pidFile, "utf8"));
    expect(await waitUntilGone(pid, 5000)).toBe(true);
  });
});

describe("/execute_with_verification", () => {
  it("passes when the check command succeeds, and answers 500 verification_failed when it never does", async () => {
    let res = await post("/execute_with_verification", {
      command: ["true"],
      verification: { command_success: "test 1 = 1" },
      max_wait_time: 5,
      check_interval: 0.1,
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ status: "success", verification: "passed", returncode: 0 });
    res = await post("/setup/execute_with_verification", {
      command: ["true"],
      verification: { window_exists: "no window has this title" },
      max_wait_time: 0.5,
      check_interval: 0.1,
    });
    expect(res.status).toBe(500);
    expect(await res.json()).toMatchObject({
      status: "verification_failed",
      verification: "failed",
      wait_time: 0.5,
    });
  });
});

describe("/run_python", () => {
  it("answers output, error and return_code; code that raises is a 200 with status error", async () => {
    let res = await post("/run_python", { code: "import sys\nprint('hi')\nprint('warn', file=sys.stderr)" });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({
      status: "success",
      message: "hi\n\nwarn\n",
      need_more: false,
      output: "hi\n",
      error: "warn\n",
      return_code: 0,
    });
    res = await post("/run_python", { code: "raise ValueError('boom')" });
    const body = await res.json();
    expect(res.status).toBe(200);
    expect(body).toMatchObject({ status: "error", output: "", return_code: 1 });
    expect(body.error).toMatch(/ValueError: boom/);
    // The script file is gone afterwards.
    const file = /File "([^"]+\.py)"/.exec(body.error)?.[1] ?? "";
    expect(file).toMatch(/python_exec_[0-9a-f]{32}\.py$/);
    expect(existsSync(file)).toBe(false);
    res = await post("/run_python", { code: "import sys; sys.exit(4)" });
    expect(await res.json()).toMatchObject({
      status: "error",
      error: "Process exited with code 4",
      return_code: 4,
    });
  });

  it("refuses a request without code (400)", async () => {
    const res = await post("/run_python", {});
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({ status: "error", message: "Code not supplied!" });
  });
});

describe("/run_bash_script", () => {
  it("answers its result (not upstream's 500): stdout and stderr merged, exit code, working directory", async () => {
    const res = await post("/run_bash_script", {
      script: "pwd; echo oops >&2; exit 2",
      working_dir: desk.dir,
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({
      status: "error",
      output: `${desk.dir}\noops\n`,
      error: "",
      returncode: 2,
    });
    const ok = await post("/run_bash_script", {
      script: "#!/bin/bash\n[[ -n $BASH_VERSION ]] && echo done",
    });
    expect(await ok.json()).toEqual({ status: "success", output: "done\n", error: "", returncode: 0 });
  });

  it("refuses a missing script or working directory (400) and kills a script past its timeout (500)", async () => {
    let res = await post("/run_bash_script", { timeout: 5 });
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({
      status: "error",
      output: "Script not supplied!",
      error: "",
      returncode: -1,
    });
    res = await post("/run_bash_script", { script: "true", working_dir: "/no/such/dir" });
    expect(res.status).toBe(400);
    expect((await res.json()).output).toBe("Working directory does not exist: /no/such/dir");
    const pidFile = join(desk.dir, "bash-child.pid");
    res = await post("/run_bash_script", { script: `sleep 60 & echo $! > ${pidFile}; wait`, timeout: 1 });
    expect(res.status).toBe(500);
    expect(await res.json()).toEqual({
      status: "error",
      output: "Script execution timed out after 1 seconds",
      error: "",
      returncode: -1,
    });
    expect(await waitUntilGone(Number(readFileSync(pidFile, "utf8")), 5000)).toBe(true);
  });
});

describe("windows", () => {
  it("/setup/launch starts a program without waiting; /window_size, activate and close find it", async () => {
    const res = await post("/setup/launch", {
      command: ["xterm", "-geometry", "40x10", "-title", "oslaunch"],
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/html; charset=utf-8");
    expect(await res.text()).toBe("xterm -geometry 40x10 -title oslaunch launched successfully");
    const id = await desk.waitForWindow("oslaunch");

    const size = await fetch(`${desk.base}/window_size`, {
      method: "POST",
      body: new URLSearchParams({ app_class_name: "XTerm" }),
    });
    expect(size.status).toBe(200);
    const { width, height } = await size.json();
    const geometry = await desk.geometry(id);
    expect([width, height]).toEqual([geometry.width, geometry.height]);
    const unknown = await fetch(`${desk.base}/window_size`, {
      method: "POST",
      body: new URLSearchParams({ app_class_name: "NoSuchClass" }),
    });
    expect(unknown.status).toBe(500);
    const missing = await fetch(`${desk.base}/window_size`, {
      method: "POST",
      body: new URLSearchParams({}),
    });
    expect(missing.status).toBe(400);
    expect(await missing.json()).toEqual({ error: "app_class_name is required" });

    const activated = await post("/setup/activate_window", { window_name: "oslaunch", strict: true });
    expect(await activated.text()).toBe("Window activated successfully");
    await eventually(async () => (await desk.run("xdotool", ["getactivewindow"])).trim() === String(id));
    const closed = await post("/setup/close_window", { window_name: "oslaunch" });
    expect(closed.status).toBe(200);
    expect(await closed.text()).toBe("Window closed successfully.");
    await eventually(async () => !(await desk.run("wmctrl", ["-l"])).includes("oslaunch"));
    expect((await post("/setup/activate_window", {})).status).toBe(400);
  });

  it("/setup/launch with a shell string, and 500 for a program that is not there", async () => {
    const res = await post("/setup/launch", { command: "xterm -title 'shell launched' &", shell: true });
    expect(await res.text()).toBe("xterm -title 'shell launched' & launched successfully");
    await desk.waitForWindow("shell launched");
    await post("/setup/close_window", { window_name: "shell launched", strict: true });
    const missing = await post("/setup/launch", { command: ["/no/such/program"] });
    expect(missing.status).toBe(500);
    expect((await missing.json()).status).toBe("error");
  });

  it("/setup/open_file opens a program and waits for its window; 404 for what is not there", async () => {
    const res = await post("/setup/open_file", { path: "xterm" });
    expect(res.status).toBe(200);
    expect(await res.text()).toBe("File opened and window activated successfully");
    expect(await desk.run("wmctrl", ["-l"])).toMatch(/xterm/);
    await post("/setup/close_window", { window_name: "xterm", strict: true });
    const missing = await post("/setup/open_file", { path: "/no/such/file.xlsx" });
    expect(missing.status).toBe(404);
    expect(await missing.text()).toBe("Application/file not found: /no/such/file.xlsx");
  });
});

describe("google-chrome", () => {
  it("is Chromium with DevTools on the port a task asks, through /setup/launch", async () => {
    const profile = mkdtempSync(join(tmpdir(), "hangar-osworld-chrome-"));
    const port = 20_000 + (process.pid % 20_000);
    try {
      const res = await post("/setup/launch", {
        command: [
          "google-chrome",
          `--remote-debugging-port=${port}`,
          `--user-data-dir=${profile}`,
          "about:blank",
        ],
      });
      expect(await res.text()).toBe(
        `google-chrome --remote-debugging-port=${port} --user-data-dir=${profile} about:blank launched successfully`,
      );
      const version = await eventually(async () => {
        const reply = await fetch(`http://127.0.0.1:${port}/json/version`).catch(() => undefined);
        return reply?.ok ? ((await reply.json()) as { Browser: string }) : undefined;
      }, 60_000);
      expect(version.Browser).toMatch(/Chrome/);
    } finally {
      // The browser is the server's child (launched detached): ended by its pids.
      for (const p of descendants(process.pid).filter((d) => d.args.includes(profile))) {
        try {
          process.kill(p.pid, "SIGKILL");
        } catch {
          // gone already
        }
      }
      rmSync(profile, { recursive: true, force: true });
    }
  });
});
