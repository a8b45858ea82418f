/**
 * The connection to the AT-SPI accessibility bus: found through the session bus (`org.a11y.Bus`
 * `GetAddress`) or `AT_SPI_BUS_ADDRESS`, then spoken to with plain D-Bus method calls (no
 * introspection, so that walking a tree of hundreds of objects stays fast).
 */
import dbus from "dbus-next";
import { CommandError } from "../../common/errors.js";

const CALL_TIMEOUT_MS = 2000;
const CONNECT_TIMEOUT_MS = 3000;

/** An object on the accessibility bus: the application's unique bus name and the object path. */
export interface AccessibleRef {
  readonly bus: string;
  readonly path: string;
}

export class AtspiConnection {
  private closed = false;

  private constructor(private readonly bus: dbus.MessageBus) {
    bus.on("error", () => {
      this.closed = true;
    });
    // dbus-next reports a closed socket only on the next write; its connection's `end` says it at once
    // (not public API: without it, the first call after a restart fails and the next one reconnects).
    const connection = (bus as unknown as { _connection?: NodeJS.EventEmitter })._connection;
    connection?.once("end", () => {
      this.closed = true;
    });
  }

  /** False once the bus connection failed or was closed; the provider then connects again. */
  get usable(): boolean {
    return !this.closed;
  }

  /**
   * Connects to the accessibility bus of the desktop described by `env` (its
   * `DBUS_SESSION_BUS_ADDRESS`, or `AT_SPI_BUS_ADDRESS` when set). Fails with `unavailable` saying
   * what is missing.
   */
  static async connect(env: NodeJS.ProcessEnv): Promise<AtspiConnection> {
    const address = env.AT_SPI_BUS_ADDRESS || (await accessibilityBusAddress(env));
    const bus = await openBus(address, "the accessibility bus");
    return new AtspiConnection(bus);
  }

  /** One method call with a deadline; D-Bus errors are thrown as they come. */
  async call<T = unknown[]>(
    ref: AccessibleRef,
    iface: string,
    member: string,
    signature = "",
    body: unknown[] = [],
  ): Promise<T> {
    if (this.closed) throw lost();
    const message = new dbus.Message({
      destination: ref.bus,
      path: ref.path,
      interface: iface,
      member,
      signature,
      body,
    });
    const pending = this.bus.call(message);
    // Writing to a closed bus reports the error at once (the call itself would never settle).
    if (this.closed) throw lost();
    const reply = await withTimeout(pending, CALL_TIMEOUT_MS, `${iface}.${member}`);
    return (reply?.body ?? []) as T;
  }

  /** A property's value (unwrapped from its variant). */
  async property<T = unknown>(ref: AccessibleRef, iface: string, name: string): Promise<T> {
    const [variant] = await this.call<[dbus.Variant]>(ref, "org.freedesktop.DBus.Properties", "Get", "ss", [
      iface,
      name,
    ]);
    return variant.value as T;
  }

  close() {
    this.closed = true;
    this.bus.disconnect();
  }
}

const lost = () =>
  new CommandError(
    "unavailable",
    "The accessibility bus connection was lost (did the desktop restart?); the next command connects again",
  );

/** Asks the session bus where the accessibility bus is. */
async function accessibilityBusAddress(env: NodeJS.ProcessEnv): Promise<string> {
  const session = env.DBUS_SESSION_BUS_ADDRESS;
  if (!session) {
    throw new CommandError(
      "unavailable",
      "Accessibility is unavailable: there is no session D-Bus (DBUS_SESSION_BUS_ADDRESS is not set). " +
        "Start the desktop with a session bus and at-spi-bus-launcher (hangar serve --virtual-display does).",
    );
  }
  const bus = await openBus(session, "the session D-Bus");
  try {
    const reply = await withTimeout(
      bus.call(
        new dbus.Message({
          destination: "org.a11y.Bus",
          path: "/org/a11y/bus",
          interface: "org.a11y.Bus",
          member: "GetAddress",
        }),
      ),
      CALL_TIMEOUT_MS,
      "org.a11y.Bus.GetAddress",
    );
    const address = reply?.body?.[0];
    if (typeof address !== "string" || address.length === 0) throw new Error("empty address");
    return address;
  } catch (err) {
    throw new CommandError(
      "unavailable",
      `Accessibility is unavailable: the session bus has no AT-SPI bus (org.a11y.Bus): ${(err as Error).message}. ` +
        "Install at-spi2-core and start at-spi-bus-launcher before the applications.",
    );
  } finally {
    bus.disconnect();
  }
}

function openBus(address: string, what: string): Promise<dbus.MessageBus> {
  return new Promise((resolve, reject) => {
    let bus: dbus.MessageBus;
    try {
      bus = dbus.sessionBus({ busAddress: address });
    } catch (err) {
      reject(new CommandError("unavailable", `Cannot connect to ${what}: ${(err as Error).message}`));
      return;
    }
    const timer = setTimeout(() => {
      bus.disconnect();
      reject(
        new CommandError(
          "unavailable",
          `Cannot connect to ${what}: no answer within ${CONNECT_TIMEOUT_MS} ms`,
        ),
      );
    }, CONNECT_TIMEOUT_MS);
    bus.once("connect", () => {
      clearTimeout(timer);
      resolve(bus);
    });
    bus.once("error", (err: Error) => {
      clearTimeout(timer);
      bus.disconnect();
      reject(new CommandError("unavailable", `Cannot connect to ${what}: ${err.message}`));
    });
  });
}

function withTimeout<T>(work: Promise<T>, ms: number, what: string): Promise<T> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new CommandError("timeout", `${what} did not answer within ${ms} ms`)),
      ms,
    );
    work.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (err) => {
        clearTimeout(timer);
        reject(err);
      },
    );
  });
}
