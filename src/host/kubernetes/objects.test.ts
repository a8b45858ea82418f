import { describe, expect, it } from "vitest";
import { type DesktopSpec, desktopPod, desktopSecret, specOf } from "./objects.js";

const spec = (commandUser: boolean): DesktopSpec => ({
  name: "box",
  image: "registry.example/hangar:1",
  cpu: 1,
  memory: 1024 ** 3,
  display: "1280x800",
  diskSize: 2 * 1024 ** 3,
  persistent: false,
  keyed: true,
  caged: false,
  commandUser,
});

const podOf = (commandUser: boolean) =>
  desktopPod(desktopSecret(spec(commandUser), { "vnc-password": "x", "api-keys": "k" }, "test"), 10);

describe("the desktop's Pod", () => {
  it("with a command user: root with the capabilities to switch to it, and secrets root's alone", () => {
    const pod = podOf(true);
    expect(pod.spec?.securityContext).toEqual({
      runAsNonRoot: false,
      runAsUser: 0,
      runAsGroup: 0,
      seccompProfile: { type: "RuntimeDefault" },
    });
    expect(pod.spec?.containers[0].securityContext).toEqual({
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      capabilities: { drop: ["ALL"], add: ["CHOWN", "DAC_OVERRIDE", "FOWNER", "KILL", "SETGID", "SETUID"] },
    });
    expect(pod.spec?.volumes?.find((v) => v.name === "secrets")?.secret?.defaultMode).toBe(0o400);
  });

  it("restricted: one non-root user, no capability, secrets its group's", () => {
    const pod = podOf(false);
    expect(pod.spec?.securityContext).toMatchObject({ runAsNonRoot: true, runAsUser: 10001, fsGroup: 10001 });
    expect(pod.spec?.containers[0].securityContext?.capabilities).toEqual({ drop: ["ALL"] });
    expect(pod.spec?.volumes?.find((v) => v.name === "secrets")?.secret?.defaultMode).toBe(0o440);
  });

  it("keeps the choice in the desktop's Secret, for every later Pod of it", () => {
    for (const commandUser of [true, false]) {
      expect(specOf(desktopSecret(spec(commandUser), {}, "test")).commandUser).toBe(commandUser);
    }
  });
});
