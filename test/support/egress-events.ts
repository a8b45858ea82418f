/** An egress decision as the host's audit sends it to a desktop's timeline (`POST /activity/egress`). */
export const REFUSED_EVENT = {
  time: "2026-12-04T10:00:00.000Z",
  via: "connect",
  name: "evil.example.net",
  address: null,
  port: 443,
  allowed: false,
  rule: "not in the allow list",
};
