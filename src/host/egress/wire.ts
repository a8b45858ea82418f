/**
 * The two bits of wire format the egress proxy reads by hand, kept as small as they can be (no
 * package for either is among the project's dependencies; `dns-packet` would replace the first):
 *
 * - a DNS query's one question, and an answer to it (RFC 1035 §4: header, question, A/AAAA
 *   records pointing back at the question's name);
 * - the server name (SNI, RFC 6066 §3) of a TLS ClientHello, so that HTTPS is matched by name
 *   without being decrypted.
 */

export interface DnsQuestion {
  id: number;
  /** Lower case, without the trailing dot. */
  name: string;
  type: number;
  /** The question's bytes (name, type, class), echoed in the answer. */
  question: Buffer;
  recursion: boolean;
}

export const DNS_TYPE = { A: 1, AAAA: 28 } as const;
export const RCODE = { noError: 0, formErr: 1, servFail: 2, nxDomain: 3, refused: 5 } as const;

/** The question of a standard query with exactly one; undefined for anything else. */
export function parseDnsQuery(message: Buffer): DnsQuestion | undefined {
  if (message.length < 12 || message.length > 512) return undefined;
  const flags = message.readUInt16BE(2);
  if (flags & 0x8000 || ((flags >> 11) & 0xf) !== 0 || message.readUInt16BE(4) !== 1) return undefined;
  const labels: string[] = [];
  let at = 12;
  for (;;) {
    const length = message[at];
    if (length === undefined || length > 63) return undefined; // compression has no place in a question
    at += 1;
    if (length === 0) break;
    if (at + length > message.length) return undefined;
    labels.push(message.toString("latin1", at, at + length).toLowerCase());
    at += length;
  }
  if (at + 4 > message.length) return undefined;
  return {
    id: message.readUInt16BE(0),
    name: labels.join("."),
    type: message.readUInt16BE(at),
    question: message.subarray(12, at + 4),
    recursion: (flags & 0x0100) !== 0,
  };
}

/** An answer to `query`: `addresses` (of the question's type) with this TTL, or an error code. */
export function dnsAnswer(query: DnsQuestion, rcode: number, addresses: string[] = [], ttl = 5): Buffer {
  const records = addresses.map((address) => {
    const data = query.type === DNS_TYPE.A ? ipv4Bytes(address) : ipv6Bytes(address);
    const record = Buffer.alloc(12 + data.length);
    record.writeUInt16BE(0xc00c, 0); // the name: a pointer to the question's
    record.writeUInt16BE(query.type, 2);
    record.writeUInt16BE(1, 4); // IN
    record.writeUInt32BE(ttl, 6);
    record.writeUInt16BE(data.length, 10);
    data.copy(record, 12);
    return record;
  });
  const header = Buffer.alloc(12);
  header.writeUInt16BE(query.id, 0);
  header.writeUInt16BE(0x8000 | 0x0400 | (query.recursion ? 0x0100 : 0) | 0x0080 | rcode, 2);
  header.writeUInt16BE(1, 4);
  header.writeUInt16BE(records.length, 6);
  return Buffer.concat([header, query.question, ...records]);
}

function ipv4Bytes(address: string): Buffer {
  return Buffer.from(address.split(".").map(Number));
}

function ipv6Bytes(address: string): Buffer {
  const [head, tail = ""] = address.split("::");
  const left = head ? head.split(":") : [];
  const right = tail ? tail.split(":") : [];
  const groups = address.includes("::")
    ? [...left, ...Array<string>(8 - left.length - right.length).fill("0"), ...right]
    : left;
  const bytes = Buffer.alloc(16);
  for (const [i, group] of groups.entries()) bytes.writeUInt16BE(Number.parseInt(group || "0", 16), i * 2);
  return bytes;
}

/** The most a ClientHello is waited for: one TLS record. */
export const MAX_CLIENT_HELLO = 16 * 1024 + 5;

/**
 * The server name in the ClientHello at the start of `data`: a string, `null` when the hello is
 * complete and names none, or undefined while more bytes are needed. Not a ClientHello: `false`.
 */
export function clientHelloServerName(data: Buffer): string | null | undefined | false {
  if (data.length < 5) return undefined;
  if (data[0] !== 0x16) return false;
  const recordEnd = 5 + data.readUInt16BE(3);
  if (recordEnd > MAX_CLIENT_HELLO) return false;
  if (data.length < recordEnd) return undefined;
  if (data[5] !== 0x01) return false;
  let at = 5 + 4 + 2 + 32; // handshake header, client version, random
  const skip = (lengthBytes: 1 | 2) => {
    if (at + lengthBytes > recordEnd) return false;
    at += lengthBytes + (lengthBytes === 1 ? data[at] : data.readUInt16BE(at));
    return at <= recordEnd;
  };
  if (!skip(1) || !skip(2) || !skip(1)) return false; // session id, cipher suites, compression
  if (at + 2 > recordEnd) return null;
  const extensionsEnd = Math.min(recordEnd, at + 2 + data.readUInt16BE(at));
  at += 2;
  while (at + 4 <= extensionsEnd) {
    const type = data.readUInt16BE(at);
    const length = data.readUInt16BE(at + 2);
    at += 4;
    if (type === 0 && at + 5 <= extensionsEnd && data[at + 2] === 0) {
      const nameLength = data.readUInt16BE(at + 3);
      if (at + 5 + nameLength > extensionsEnd) return false;
      return data.toString("latin1", at + 5, at + 5 + nameLength).toLowerCase();
    }
    at += length;
  }
  return null;
}
