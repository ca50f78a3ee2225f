"""The secrets of a standing cluster (`harness cluster up`), generated for it and for nothing else.

Everything goes into one folder that only its owner may read (0700; files 0600): an SSH client key,
one SSH host key per node, a CA and the brokers' certificate signed by it (for 127.0.0.1, the only
address the cluster listens on), the brokers' PKCS#12 keystore and its password, and the SCRAM
user's password. Made with the system's ssh-keygen and openssl: nothing new to install, and each is
the tool an operator would use. `cluster down` removes the folder.
"""

from __future__ import annotations

import os
import secrets
import subprocess
from dataclasses import dataclass
from pathlib import Path

from harness.errors import HarnessError

SCRAM_USER = "harness"
SCRAM_MECHANISM = "SCRAM-SHA-512"


def _run(args: list[str], what: str) -> None:
    done = subprocess.run(args, capture_output=True, text=True)
    if done.returncode != 0:
        raise HarnessError(f"could not make the standing cluster's {what}: {done.stderr.strip()[:400]}",
                           hint=f"{args[0]} must be installed (apt-get install {'openssh-client' if 'ssh' in args[0] else 'openssl'})")


def private_folder(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, 0o700)
    return path


def write_private(path: Path, text: str) -> Path:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return path


@dataclass(frozen=True)
class StandingSecrets:
    folder: Path

    @property
    def client_key(self) -> Path:
        return self.folder / "id_ed25519"

    @property
    def ca(self) -> Path:
        return self.folder / "ca.pem"

    @property
    def password_file(self) -> Path:
        return self.folder / "scram-password"

    @property
    def known_hosts(self) -> Path:
        return self.folder / "known_hosts"

    def node(self, node_id: int) -> Path:
        """What node `node_id` mounts read-only at /opt/secrets: host key, authorized key, keystore."""
        return self.folder / f"node-{node_id}"

    def keystore_password(self) -> str:
        return (self.folder / "keystore-password").read_text().strip()

    def scram_password(self) -> str:
        return self.password_file.read_text().strip()

    def host_public_key(self, node_id: int) -> str:
        return (self.node(node_id) / "ssh_host_ed25519_key.pub").read_text().split()[:2]  # type: ignore[return-value]


def generate(folder: Path, node_ids: list[int], validity_days: int = 30) -> StandingSecrets:
    """Generate every secret of a standing cluster into `folder` (made 0700)."""
    s = StandingSecrets(private_folder(folder))
    _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "kafka-harness standing cluster", "-f", str(s.client_key)], "SSH key")
    write_private(s.password_file, secrets.token_urlsafe(24) + "\n")
    keystore_password = secrets.token_urlsafe(24)
    write_private(s.folder / "keystore-password", keystore_password + "\n")
    ca_key = s.folder / "ca.key"
    _run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(ca_key), "-out", str(s.ca),
          "-days", str(validity_days), "-subj", f"/CN=kafka-harness standing CA {secrets.token_hex(4)}",
          "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign"], "CA")
    broker_key, csr, cert = s.folder / "broker.key", s.folder / "broker.csr", s.folder / "broker.crt"
    _run(["openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(broker_key), "-out", str(csr),
          "-subj", "/CN=kafka-harness standing broker"], "broker key")
    extensions = write_private(s.folder / "broker.ext", "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
                                                        "extendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n")
    _run(["openssl", "x509", "-req", "-in", str(csr), "-CA", str(s.ca), "-CAkey", str(ca_key), "-CAcreateserial",
          "-out", str(cert), "-days", str(validity_days), "-extfile", str(extensions)], "broker certificate")
    for node_id in node_ids:
        node = private_folder(s.node(node_id))
        _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"kafka-harness standing node {node_id}",
              "-f", str(node / "ssh_host_ed25519_key")], "SSH host key")
        write_private(node / "authorized_keys", (s.client_key.with_suffix(".pub")).read_text())
        # The password reaches openssl through its environment, not its arguments (ps shows those).
        done = subprocess.run(["openssl", "pkcs12", "-export", "-in", str(cert), "-inkey", str(broker_key), "-certfile", str(s.ca),
                               "-name", "broker", "-out", str(node / "broker.p12"), "-passout", "env:KH_KEYSTORE_PASSWORD"],
                              capture_output=True, text=True, env={**os.environ, "KH_KEYSTORE_PASSWORD": keystore_password})
        if done.returncode != 0:
            raise HarnessError(f"could not make the brokers' keystore: {done.stderr.strip()[:400]}", hint="openssl must be installed")
        os.chmod(node / "broker.p12", 0o600)
        write_private(node / "scram.arg", f"{SCRAM_MECHANISM}=[name={SCRAM_USER},password={s.scram_password()}]\n")
    for path in s.folder.rglob("*"):
        if path.is_file():
            os.chmod(path, 0o600)
    return s
