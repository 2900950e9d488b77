"""The report's third-party browser code: 3Dmol.js (Rego & Koes 2015, *Bioinformatics* 31:1322), the
molecular viewer of the protein pages, shipped in ``workflow_lib/report/assets`` from its npm package
(``3dmol``, BSD-3-Clause) so that a report opens offline, from a laptop or a cluster's file share, with no CDN.

``VENDOR.json`` records where each file came from (package, version, tarball, the registry's integrity hash,
the file's SHA-256). :func:`copy_assets` checks the SHA-256 before copying the viewer next to a report, so an
edited or truncated file never reaches a user. ``python -m workflow_lib.report.vendor --version X``
(``make viewer``) refreshes the file from npm and rewrites ``VENDOR.json``.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

from workflow_lib.errors import InputError
from workflow_lib.seqio.atomic import write_text_atomic

ASSETS = Path(__file__).resolve().parent / "assets"
VENDOR_FILE = ASSETS / "VENDOR.json"
VIEWER_JS = "3Dmol-min.js"
VIEWER_LICENSE = "3Dmol.LICENSE.txt"
OWN_ASSETS = ("report.css", "table.js", "protein.js")
"""The report's own stylesheet and scripts (written here, no dependency)."""


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def vendored() -> dict:
    """The ``VENDOR.json`` record of every third-party file."""
    return json.loads(VENDOR_FILE.read_text())


def verify_assets() -> None:
    """InputError unless every vendored file is present with the SHA-256 that ``VENDOR.json`` records."""
    for name, record in vendored().items():
        path = ASSETS / name
        if not path.is_file():
            raise InputError(f"{path}: the report's viewer is missing; reinstall trackfold or run `make viewer`")
        if _sha256(path) != record["sha256"]:
            raise InputError(f"{path}: differs from {record['package']} {record['version']} "
                             f"(SHA-256 in {VENDOR_FILE.name}); run `make viewer` to restore it")


def copy_assets(out_dir: str | Path) -> Path:
    """Copy the viewer, its licence and the report's own CSS/JS into ``out_dir/assets`` (atomically per file,
    skipped when already identical); returns that folder."""
    verify_assets()
    target = Path(out_dir) / "assets"
    target.mkdir(parents=True, exist_ok=True)
    for name in (VIEWER_JS, VIEWER_LICENSE, *OWN_ASSETS):
        source, dest = ASSETS / name, target / name
        if dest.is_file() and dest.stat().st_size == source.stat().st_size and _sha256(dest) == _sha256(source):
            continue
        partial = dest.with_name(f".{dest.name}.partial")
        shutil.copyfile(source, partial)
        partial.replace(dest)
    return target


def _integrity_ok(tarball: Path, integrity: str) -> bool:
    algorithm, _, expected = integrity.partition("-")
    digest = hashlib.new(algorithm, tarball.read_bytes()).digest()
    return base64.b64encode(digest).decode() == expected


def refresh(version: str) -> dict:
    """Fetch ``3dmol@version`` with npm, check the tarball against the registry's integrity hash, install its
    minified build and licence into the assets and rewrite ``VENDOR.json``."""
    if shutil.which("npm") is None:
        raise InputError("`make viewer` needs npm (Debian: apt-get install npm)")
    spec = f"3dmol@{version}"
    info = json.loads(subprocess.run(["npm", "view", spec, "dist", "--json"], check=True, capture_output=True,
                                     text=True).stdout)
    with tempfile.TemporaryDirectory() as tmp:
        packed = subprocess.run(["npm", "pack", spec, "--json"], cwd=tmp, check=True, capture_output=True,
                                text=True).stdout
        tarball = Path(tmp) / json.loads(packed)[0]["filename"]
        if not _integrity_ok(tarball, info["integrity"]):
            raise InputError(f"{tarball.name}: does not match the registry's integrity hash for {spec}")
        with tarfile.open(tarball) as archive:
            for member, name in (("package/build/3Dmol-min.js", VIEWER_JS), ("package/LICENSE", VIEWER_LICENSE)):
                data = archive.extractfile(member).read()
                partial = ASSETS / f".{name}.partial"
                partial.write_bytes(data)
                partial.replace(ASSETS / name)
    record = {VIEWER_JS: {"package": "3dmol", "version": version, "source": info["tarball"],
                          "integrity": info["integrity"], "path_in_package": "package/build/3Dmol-min.js",
                          "sha256": _sha256(ASSETS / VIEWER_JS), "license": f"BSD-3-Clause ({VIEWER_LICENSE})",
                          "homepage": "https://3dmol.org"}}
    write_text_atomic(VENDOR_FILE, json.dumps(record, indent=2) + "\n")
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Refresh the report's 3D viewer (3Dmol.js) from npm.")
    parser.add_argument("--version", required=True, help="3dmol npm version, e.g. 2.5.5")
    args = parser.parse_args(argv)
    record = refresh(args.version)
    print(json.dumps(record, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
