/**
 * A caged desktop's trust of its egress CA (docs/egress.md): the host service mounts the CA's
 * certificate (its key stays on the host) at one path in every container and Pod, where the desktop
 * user's NSS database (Chromium's) takes it in at start. The system's store is the host's to set:
 * as root in a container, through an init container's copy of /etc/ssl/certs in a Pod.
 */

/** Where a caged desktop finds its egress CA's certificate. */
export const EGRESS_CA_IN_DESKTOP = "/run/hangar-egress/ca.crt";

/** A shell script that adds the CA to `$HOME/.pki/nssdb` (certutil: Debian's libnss3-tools). */
export const TRUST_IN_NSS = [
  "command -v certutil >/dev/null || { echo 'certutil is not in the image (Debian: libnss3-tools)' >&2; exit 3; }",
  'db="sql:$HOME/.pki/nssdb"',
  'mkdir -p "$HOME/.pki/nssdb"',
  'certutil -d "$db" -L >/dev/null 2>&1 || certutil -d "$db" -N --empty-password',
  `certutil -d "$db" -A -t C,, -n "Hangar egress" -i ${EGRESS_CA_IN_DESKTOP}`,
].join(" && ");
