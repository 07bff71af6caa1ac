"""Split a PEM CA bundle into an OpenSSL hashed directory (``<subject-hash>.<n>``).

Run by the Makefile on each artifact: ``python -P scripts/ca_dir.py <bundle> <dir>``.
A TLS context on the directory (``capath``) reads only the root a handshake needs,
where one on the bundle parses all ~140 of them: ~8 ms instead of ~37 ms for context
plus first handshake (acmi_core.store.upstash.tls_context). Same roots, same checks.

The names are OpenSSL's own subject hashes (``openssl rehash``); without an ``openssl``
command nothing is written, and the runtime loads the bundle as httpx would.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

_CERT = re.compile(r"-----BEGIN CERTIFICATE-----.+?-----END CERTIFICATE-----\n?", re.S)


def write_ca_dir(bundle: Path, target: Path) -> int:
    """The certificates of ``bundle`` in ``target``, one file each; how many."""
    certificates = _CERT.findall(bundle.read_text(encoding="ascii"))
    if not certificates:
        raise ValueError(f"{bundle}: no certificate")
    staging = target.with_name(target.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    for i, pem in enumerate(certificates):
        (staging / f"cert{i}.pem").write_text(pem if pem.endswith("\n") else pem + "\n")
    # One openssl run names them all (<hash>.<n> links); the links become plain files,
    # since an artifact's zip need not keep symlinks.
    subprocess.run(["openssl", "rehash", str(staging)], check=True, capture_output=True)
    links = [p for p in staging.iterdir() if p.is_symlink()]
    if len(links) != len(certificates):
        raise RuntimeError(f"openssl rehash named {len(links)} of {len(certificates)} roots")
    for link in links:
        pem = link.resolve().read_text(encoding="ascii")
        link.unlink()
        link.write_text(pem)
    for original in staging.glob("cert*.pem"):
        original.unlink()
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)  # all or nothing: a half-written directory would drop roots
    return len(certificates)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: ca_dir.py <bundle.pem> <directory>", file=sys.stderr)
        return 2
    if shutil.which("openssl") is None:
        print("ca_dir.py: no openssl command: the runtime will load the bundle", file=sys.stderr)
        return 0
    count = write_ca_dir(Path(argv[0]), Path(argv[1]))
    print(f"ca_dir.py: {count} certificates in {argv[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
