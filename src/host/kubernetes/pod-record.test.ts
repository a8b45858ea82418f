import type { V1Pod } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { podReady, podState } from "./pod-record.js";

const pod = (status: V1Pod["status"], deleting = false): V1Pod => ({
  metadata: { name: "hangar-x", ...(deleting && { deletionTimestamp: new Date() }) },
  status,
});

describe("a Pod's state as lume says it", () => {
  it("is running from Pending on, and stopped once deleting or ended", () => {
    expect(podState(undefined)).toEqual({ running: false, error: null });
    expect(podState(pod({ phase: "Pending" }))).toEqual({ running: true, error: null });
    expect(podState(pod({ phase: "Running" }, true))).toEqual({ running: false, error: null });
    expect(podState(pod({ phase: "Succeeded", containerStatuses: [] }))).toEqual({
      running: false,
      error: null,
    });
  });

  it("counts a Pod waiting for what will not come as stopped, with the reason", () => {
    const waiting = pod({
      phase: "Pending",
      containerStatuses: [
        {
          name: "desktop",
          image: "x",
          imageID: "",
          ready: false,
          restartCount: 0,
          state: { waiting: { reason: "ImagePullBackOff", message: "Back-off pulling image" } },
        },
      ],
    });
    expect(podState(waiting)).toEqual({ running: false, error: "ImagePullBackOff: Back-off pulling image" });
  });

  it("says how a Pod ended, and why it cannot be scheduled", () => {
    const ended = pod({
      phase: "Failed",
      containerStatuses: [
        {
          name: "desktop",
          image: "x",
          imageID: "",
          ready: false,
          restartCount: 0,
          state: { terminated: { exitCode: 2, reason: "Error" } },
        },
      ],
    });
    expect(podState(ended).error).toBe("exited with code 2 (Error)");
    const pending = pod({
      phase: "Pending",
      conditions: [{ type: "PodScheduled", status: "False", reason: "Unschedulable", message: "0/1 nodes" }],
    });
    expect(podState(pending)).toEqual({ running: true, error: "Unschedulable: 0/1 nodes" });
  });

  it("is ready only with the Ready condition true", () => {
    expect(podReady(pod({ phase: "Running", conditions: [{ type: "Ready", status: "True" }] }))).toBe(true);
    expect(podReady(pod({ phase: "Running", conditions: [{ type: "Ready", status: "False" }] }))).toBe(false);
    expect(podReady(undefined)).toBe(false);
  });
});
