/**
 * `HangarBrowserToolset` (Claude's `browser_toolset_20260801`) through the Anthropic SDK's own
 * pipeline (`toolResult`), on the desktop's own Chromium: member `tool_use` blocks typed as the SDK
 * defines them, a form page served on loopback, and what the page then holds read back through
 * the page itself.
 */
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type * as Beta from "@anthropic-ai/sdk/resources/beta";
import sharp from "sharp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HangarBrowserToolset } from "../../src/client/anthropic.js";
import { Hangar } from "../../src/client/index.js";
import { systemChromium } from "../support/browser.js";
import { type DesktopServer, startDesktopServer } from "../support/desktop.js";

const FORM = `<!doctype html><title>Sign up</title>
<style>body{margin:0;font:16px sans-serif}</style>
<h1>Sign up</h1>
<form>
  <label>Email <input id="email" oninput="document.getElementById('echo').textContent = 'typed ' + this.value"></label>
  <label><input type="checkbox" id="agree"> I agree to the terms</label>
  <label>Plan <select id="plan"><option value="free">Free</option><option value="pro">Pro</option></select></label>
  <label>Attachment <input type="file" id="file"
    onchange="document.getElementById('echo').textContent = 'attached ' + this.files[0].name"></label>
  <button type="button" onclick="document.getElementById('out').textContent =
    'sent ' + document.getElementById('email').value + ' ' + document.getElementById('agree').checked + ' ' +
    document.getElementById('plan').value">Send</button>
</form>
<p id="echo">nothing yet</p>
<p id="out">not sent</p>
<div style="margin-top:3000px"><button type="button">Far below</button></div>`;
const OTHER = "<!doctype html><title>Other page</title><p>Another page.</p>";

type Block = Exclude<Beta.BetaToolResultBlockParam["content"], string | undefined>[number];

let desk: DesktopServer;
let site: Server;
let base: string;
let profile: string;
let uploads: string;
let browser: HangarBrowserToolset;
let id = 0;

/** A member call exactly as the model emits it (the SDK's own block types). */
function use<B extends Beta.BetaResponseBrowserToolUseBlock>(name: B["name"], input: B["input"]): B {
  return { type: "tool_use", id: `toolu_${++id}`, name, input, toolset_name: "browser" } as B;
}

function texts(content: Beta.BetaToolResultBlockParam["content"]): string[] {
  return ((content ?? []) as Block[]).flatMap((block) => (block.type === "text" ? [block.text] : []));
}

function state(content: Beta.BetaToolResultBlockParam["content"]): Beta.BetaBrowserStateBlockParam {
  const block = ((content ?? []) as Block[]).find((b) => b.type === "browser_state");
  if (block?.type !== "browser_state") throw new Error("no browser_state block");
  return block;
}

/** The ref of the line of `text` that matches `pattern`. */
function refIn(text: string, pattern: RegExp): string {
  const line = text.split("\n").find((l) => pattern.test(l));
  const ref = line && /\[(ref_\d+)\]/.exec(line)?.[1];
  if (!ref) throw new Error(`no line matching ${pattern} in:\n${text}`);
  return ref;
}

/** Opens the form page afresh in the current tab. */
async function openForm(toolset = browser) {
  const opened = await toolset.toolResult(
    use<Beta.BetaResponseBrowserNavigateToolUseBlock>("navigate", { url: `${base}/form` }),
  );
  expect(opened.is_error).toBeUndefined();
}

async function pageText(toolset = browser): Promise<string> {
  const result = await toolset.toolResult(
    use<Beta.BetaResponseBrowserGetPageTextToolUseBlock>("get_page_text", {}),
  );
  return texts(result.content).join("\n");
}

beforeAll(async () => {
  profile = mkdtempSync(join(tmpdir(), "hangar-toolset-profile-"));
  desk = await startDesktopServer(
    { width: 1280, height: 800 },
    {
      server: {
        browser: {
          executablePath: systemChromium(),
          profileDir: profile,
          allowEvaluate: true,
          env: () => desk.display.env,
        },
      },
    },
  );
  site = createServer((req, res) =>
    res.writeHead(200, { "content-type": "text/html" }).end(req.url === "/other" ? OTHER : FORM),
  );
  await new Promise<void>((resolve) => site.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;
  uploads = mkdtempSync(join(tmpdir(), "hangar-uploads-"));
  browser = new HangarBrowserToolset(desk.server.url);
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await desk?.stop();
  site?.close();
  rmSync(profile, { recursive: true, force: true });
  rmSync(uploads, { recursive: true, force: true });
});

describe("HangarBrowserToolset.toolResult on the desktop's Chromium", () => {
  it("navigates, answering where it landed and the tabs, and the desktop shows the page", async () => {
    const result = await browser.toolResult(
      use<Beta.BetaResponseBrowserNavigateToolUseBlock>("navigate", { url: `${base}/form` }),
    );
    expect(result).toMatchObject({ type: "tool_result", toolset_name: "browser" });
    expect(result.is_error).toBeUndefined();
    expect(texts(result.content)).toEqual([`Navigated to ${base}/form — Sign up (HTTP 200)`]);
    const tabs = state(result.content).tabs;
    expect(tabs.filter((t) => t.active)).toEqual([
      expect.objectContaining({ url: `${base}/form`, title: "Sign up" }),
    ]);
    // The page is the one on the desktop's screen: Chromium's window there carries its title.
    await desk.waitForWindow("Sign up - Chromium");
  });

  it("read_page gives refs that form_input fills, and the page holds the values", async () => {
    await openForm();
    const read = await browser.toolResult(use<Beta.BetaResponseBrowserReadPageToolUseBlock>("read_page", {}));
    const tree = texts(read.content)[0];
    expect(tree).toMatch(/heading "Sign up" \[ref_\d+\] level=1/);
    expect(tree).not.toContain("Far below"); // off screen: only with filter "all"
    const email = refIn(tree, /textbox "Email"/);
    const agree = refIn(tree, /checkbox "I agree to the terms"/);
    const plan = refIn(tree, /combobox "Plan"/);
    const send = refIn(tree, /button "Send"/);

    const filled = await browser.toolResult(
      use<Beta.BetaResponseBrowserFormInputToolUseBlock>("form_input", {
        target: { type: "ref", ref: email },
        value: "ada@example.org",
      }),
    );
    expect(filled.is_error).toBeUndefined();
    expect(texts(filled.content)).toEqual([`Set the value of ${email}.`]);
    // The page's own input handler ran.
    expect(await pageText()).toContain("typed ada@example.org");
    await browser.toolResult(
      use<Beta.BetaResponseBrowserFormInputToolUseBlock>("form_input", {
        target: { type: "ref", ref: agree },
        value: true,
      }),
    );
    const chose = await browser.toolResult(
      use<Beta.BetaResponseBrowserFormInputToolUseBlock>("form_input", {
        target: { type: "ref", ref: plan },
        value: "Pro",
      }),
    );
    expect(texts(chose.content)).toEqual([`Set the value of ${plan}.`, 'selected "Pro"']);

    // A second reading names the same elements by the same refs, with their new values.
    const again = texts(
      (
        await browser.toolResult(
          use<Beta.BetaResponseBrowserReadPageToolUseBlock>("read_page", { filter: "interactive" }),
        )
      ).content,
    )[0];
    expect(refIn(again, /textbox "Email"/)).toBe(email);
    expect(again).toMatch(new RegExp(`textbox "Email" \\[${email}\\] value="ada@example.org"`));
    expect(again).toMatch(new RegExp(`checkbox "I agree to the terms" \\[${agree}\\] checked`));
    expect(again).not.toMatch(/^\s*text /m); // interactive: elements only

    const clicked = await browser.toolResult(
      use<Beta.BetaResponseBrowserLeftClickToolUseBlock>("left_click", {
        target: { type: "ref", ref: send },
      }),
    );
    expect(texts(clicked.content)).toEqual(["Clicked."]);
    expect(await pageText()).toContain("sent ada@example.org true pro");
  });

  it("find answers the best matching elements with the refs read_page gave", async () => {
    await openForm();
    const tree = texts(
      (
        await browser.toolResult(
          use<Beta.BetaResponseBrowserReadPageToolUseBlock>("read_page", { filter: "all" }),
        )
      ).content,
    )[0];
    expect(tree).toContain('button "Far below"');
    const found = texts(
      (
        await browser.toolResult(
          use<Beta.BetaResponseBrowserFindToolUseBlock>("find", { query: "email field" }),
        )
      ).content,
    )[0];
    expect(found.split("\n")[0]).toContain(`textbox "Email" [${refIn(tree, /textbox "Email"/)}]`);
    const far = texts(
      (
        await browser.toolResult(
          use<Beta.BetaResponseBrowserFindToolUseBlock>("find", { query: "far below button" }),
        )
      ).content,
    )[0];
    expect(far.split("\n")[0]).toMatch(/button "Far below" \[ref_\d+\] \(off screen\)/);
    const none = await browser.toolResult(
      use<Beta.BetaResponseBrowserFindToolUseBlock>("find", { query: "zebra" }),
    );
    expect(texts(none.content)).toEqual(['No element matches "zebra".']);
  });

  it("clicks and types by viewport coordinates, and screenshots the viewport", async () => {
    await openForm();
    // Where things are, as the page measures it (javascript_exec: off by default, on here with a confirm).
    const scripted = new HangarBrowserToolset(desk.server.url, {
      configs: { javascript_exec: { enabled: true } },
      confirm: () => true,
    });
    const measure = async (text: string) =>
      JSON.parse(
        texts(
          (
            await scripted.toolResult(
              use<Beta.BetaResponseBrowserJavascriptExecToolUseBlock>("javascript_exec", { text }),
            )
          ).content,
        )[0],
      );
    try {
      const centre = (selector: string) =>
        measure(
          `(() => { const r = document.querySelector(${JSON.stringify(selector)}).getBoundingClientRect(); ` +
            "return [Math.round(r.x + r.width / 2), Math.round(r.y + r.height / 2)]; })()",
        );
      const [ex, ey] = await centre("#email");
      await browser.toolResult(
        use<Beta.BetaResponseBrowserLeftClickToolUseBlock>("left_click", {
          target: { type: "coordinate", x: ex, y: ey },
        }),
      );
      const typed = await browser.toolResult(
        use<Beta.BetaResponseBrowserTypeToolUseBlock>("type", { text: "grace@example.org" }),
      );
      expect(texts(typed.content)).toEqual(["Typed."]);
      expect(await pageText()).toContain("typed grace@example.org");
      const keyed = await browser.toolResult(
        use<Beta.BetaResponseBrowserKeyToolUseBlock>("key", { text: "ctrl+a BackSpace" }),
      );
      expect(texts(keyed.content)).toEqual(["Pressed ctrl+a BackSpace."]);
      expect(await pageText()).toMatch(/^typed$/m);
      const [bx, by] = await centre("button");
      await browser.toolResult(
        use<Beta.BetaResponseBrowserLeftClickToolUseBlock>("left_click", {
          target: { type: "coordinate", x: bx, y: by },
        }),
      );
      expect(await pageText()).toMatch(/sent\s+false free/);

      const shot = await browser.toolResult(
        use<Beta.BetaResponseBrowserScreenshotToolUseBlock>("screenshot", {}),
      );
      const image = (shot.content as Block[])[0];
      if (image.type !== "image" || image.source.type !== "base64")
        throw new Error("expected an image block");
      expect(image.source.media_type).toBe("image/png");
      const meta = await sharp(Buffer.from(image.source.data, "base64")).metadata();
      expect(await measure("[innerWidth, innerHeight]")).toEqual([meta.width, meta.height]);
    } finally {
      await scripted.close();
    }
    const zoom = await browser.toolResult(
      use<Beta.BetaResponseBrowserZoomToolUseBlock>("zoom", { region: [0, 0, 200, 100] }),
    );
    const zoomed = (zoom.content as Block[])[0];
    if (zoomed.type !== "image" || zoomed.source.type !== "base64")
      throw new Error("expected an image block");
    expect(await sharp(Buffer.from(zoomed.source.data, "base64")).metadata()).toMatchObject({
      width: 200,
      height: 100,
    });
  });

  it("opens, lists, switches and closes tabs, each answered by the browser_state block", async () => {
    await openForm();
    const opened = await browser.toolResult(use<Beta.BetaResponseBrowserNewTabToolUseBlock>("new_tab", {}));
    expect(opened.is_error).toBeUndefined();
    const after = state(opened.content);
    const fresh = after.tabs.find((t) => t.active)!;
    expect(after.state_changes).toEqual([{ type: "tab_opened", tab_id: fresh.tab_id }]);
    expect(after.tabs).toHaveLength(2);
    await browser.toolResult(
      use<Beta.BetaResponseBrowserNavigateToolUseBlock>("navigate", {
        url: `${base}/other`,
        tab_id: fresh.tab_id,
      }),
    );

    const listed = state(
      (await browser.toolResult(use<Beta.BetaResponseBrowserListTabsToolUseBlock>("list_tabs", {}))).content,
    );
    const form = listed.tabs.find((t) => t.title === "Sign up")!;
    expect(listed.tabs.find((t) => t.active)).toMatchObject({ tab_id: fresh.tab_id, title: "Other page" });

    const switched = state(
      (
        await browser.toolResult(
          use<Beta.BetaResponseBrowserSwitchTabToolUseBlock>("switch_tab", { tab_id: form.tab_id }),
        )
      ).content,
    );
    expect(switched.tabs.find((t) => t.active)?.tab_id).toBe(form.tab_id);
    await desk.waitForWindow("Sign up - Chromium");
    // A member naming a tab acts there, whichever is active.
    const other = await pageTextOf(fresh.tab_id);
    expect(other).toContain("Another page.");

    const closed = state(
      (
        await browser.toolResult(
          use<Beta.BetaResponseBrowserCloseTabToolUseBlock>("close_tab", { tab_id: fresh.tab_id }),
        )
      ).content,
    );
    expect(closed.tabs.map((t) => t.tab_id)).toEqual([form.tab_id]);
    const gone = await browser.toolResult(
      use<Beta.BetaResponseBrowserSwitchTabToolUseBlock>("switch_tab", { tab_id: fresh.tab_id }),
    );
    expect(gone.is_error).toBe(true);
    expect(texts(gone.content)[0]).toContain(`No open tab "${fresh.tab_id}"`);
  });

  it("a ref of an element that is gone, a bad target or an unknown member is the model's error; nothing runs", async () => {
    await openForm();
    const tree = texts(
      (await browser.toolResult(use<Beta.BetaResponseBrowserReadPageToolUseBlock>("read_page", {}))).content,
    )[0];
    const email = refIn(tree, /textbox "Email"/);
    await browser.toolResult(
      use<Beta.BetaResponseBrowserNavigateToolUseBlock>("navigate", { url: "reload" }),
    );
    const stale = await browser.toolResult(
      use<Beta.BetaResponseBrowserFormInputToolUseBlock>("form_input", {
        target: { type: "ref", ref: email },
        value: "x",
      }),
    );
    expect(stale).toMatchObject({ is_error: true, toolset_name: "browser" });
    expect(texts(stale.content)[0]).toContain(`${email} is no longer on the page`);
    expect(await pageText()).toContain("nothing yet");

    const unknownRef = await browser.toolResult(
      use<Beta.BetaResponseBrowserLeftClickToolUseBlock>("left_click", {
        target: { type: "ref", ref: "ref_999999" },
      }),
    );
    expect(texts(unknownRef.content)[0]).toContain('Unknown element "ref_999999"');
    const badUrl = await browser.toolResult(
      use<Beta.BetaResponseBrowserNavigateToolUseBlock>("navigate", { url: "javascript:alert(1)" }),
    );
    expect(texts(badUrl.content)).toEqual(["navigate opens http and https addresses only"]);
    const unknown = await browser.toolResult({
      type: "tool_use",
      id: "toolu_x",
      name: "teleport",
      input: {},
      toolset_name: "browser",
    });
    expect(unknown).toMatchObject({ is_error: true, tool_use_id: "toolu_x", toolset_name: "browser" });
    expect(texts(unknown.content)[0]).toContain("unknown browser toolset member 'teleport'");
  });

  it("a member disabled by configs is refused as the SDK words it, and does not run", async () => {
    const limited = new HangarBrowserToolset(new Hangar({ url: desk.server.url }), {
      configs: { navigate: { enabled: false } },
    });
    try {
      await openForm();
      expect(limited.toJSON().configs).toMatchObject({ navigate: { enabled: false } });
      const refused = await limited.toolResult(
        use<Beta.BetaResponseBrowserNavigateToolUseBlock>("navigate", { url: `${base}/other` }),
      );
      expect(refused.is_error).toBe(true);
      expect(texts(refused.content)).toEqual([
        "The 'navigate' action is not permitted by this application's permissions and cannot be used in this session.",
      ]);
      expect(await pageText(limited)).toContain("Sign up");
    } finally {
      await limited.close();
    }
  });

  it("file_upload takes a file of the desktop inside the upload roots only, once enabled and confirmed", async () => {
    const asked: string[] = [];
    const uploader = new HangarBrowserToolset(desk.server.url, {
      configs: { file_upload: { enabled: true } },
      confirm: (ctx) => {
        asked.push(ctx.member);
        return true;
      },
      uploadRoots: [uploads],
    });
    try {
      await openForm(uploader);
      writeFileSync(join(uploads, "report.txt"), "the report");
      mkdirSync(join(uploads, "sub"));
      const outside = mkdtempSync(join(tmpdir(), "hangar-outside-"));
      writeFileSync(join(outside, "secret.txt"), "secret");
      symlinkSync(join(outside, "secret.txt"), join(uploads, "sub", "link.txt"));
      const tree = texts(
        (await uploader.toolResult(use<Beta.BetaResponseBrowserReadPageToolUseBlock>("read_page", {})))
          .content,
      )[0];
      const file = refIn(tree, /button "Attachment"/);

      // A link out of the roots is refused on the desktop; a path outside them before it is sent.
      const viaLink = await uploader.toolResult(
        use<Beta.BetaResponseBrowserFileUploadToolUseBlock>("file_upload", {
          target: { type: "ref", ref: file },
          paths: [join(uploads, "sub", "link.txt")],
        }),
      );
      expect(texts(viaLink.content)[0]).toContain("Not inside the upload directories");
      const elsewhere = await uploader.toolResult(
        use<Beta.BetaResponseBrowserFileUploadToolUseBlock>("file_upload", {
          target: { type: "ref", ref: file },
          paths: [join(outside, "secret.txt")],
        }),
      );
      expect(texts(elsewhere.content)).toEqual([
        "file_upload may take files from the upload directories only",
      ]);
      rmSync(outside, { recursive: true, force: true });

      const uploaded = await uploader.toolResult(
        use<Beta.BetaResponseBrowserFileUploadToolUseBlock>("file_upload", {
          target: { type: "ref", ref: file },
          paths: [join(uploads, "report.txt")],
        }),
      );
      expect(uploaded.is_error).toBeUndefined();
      expect(texts(uploaded.content)).toEqual(["Uploaded."]);
      expect(await pageText(uploader)).toContain("attached report.txt");
      expect(asked.filter((m) => m === "file_upload")).toHaveLength(2);
    } finally {
      await uploader.close();
    }
  });
});

async function pageTextOf(tabId: string): Promise<string> {
  const result = await browser.toolResult(
    use<Beta.BetaResponseBrowserGetPageTextToolUseBlock>("get_page_text", { tab_id: tabId }),
  );
  return texts(result.content).join("\n");
}
