#!/usr/bin/env python3
"""Image sizes: uncompressed (as the engine reports) and compressed (as a registry
stores them: the sum of the gzip layer blobs and the config in the pushed manifest).

    python bench/sizes.py [TAG ...]        (default: every built tag of matrix.yaml)

Starts Debian's `docker-registry` on a free 127.0.0.1 port with storage in a scratch
directory, pushes each image there, reads its manifest through the registry HTTP API v2
(https://distribution.github.io/distribution/spec/api/), then stops the registry and
removes the temporary tags. Writes bench/results/sizes.json.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import docker

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from stagecraft.expand import expand
from stagecraft.matrix import load_matrix

MANIFEST_V2 = "application/vnd.docker.distribution.manifest.v2+json"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv: list[str]) -> int:
    matrix = load_matrix(ROOT / "matrix.yaml")
    client = docker.from_env(timeout=1800)
    tags = argv or [s.tag for s in expand(matrix)]
    exe = shutil.which("docker-registry")
    if not exe:
        sys.exit("docker-registry not installed: apt-get install docker-registry")
    port = free_port()
    results = []
    with tempfile.TemporaryDirectory(prefix="stagecraft-sizes-") as tmp:
        cfg = Path(tmp) / "config.yml"
        cfg.write_text(f"version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: {tmp}/data\n"
                       f"http:\n  addr: 127.0.0.1:{port}\n")
        reg = subprocess.Popen([exe, "serve", str(cfg)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            for _ in range(50):
                try:
                    urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/", timeout=1)
                    break
                except OSError:
                    time.sleep(0.2)
            for tag in tags:
                ref = f"{matrix.repository}:{tag}"
                try:
                    image = client.images.get(ref)
                except docker.errors.ImageNotFound:
                    print(f"{tag}: not built, skipped", file=sys.stderr)
                    continue
                repo = f"127.0.0.1:{port}/sizes/{matrix.repository.replace('/', '-')}"
                image.tag(repo, tag)
                t0 = time.monotonic()
                for event in client.api.push(repo, tag, stream=True, decode=True):
                    if "error" in event:
                        sys.exit(f"push failed: {event['error']}")
                push_s = time.monotonic() - t0
                req = urllib.request.Request(f"http://127.0.0.1:{port}/v2/sizes/"
                                             f"{matrix.repository.replace('/', '-')}/manifests/{tag}",
                                             headers={"Accept": MANIFEST_V2})
                manifest = json.load(urllib.request.urlopen(req))
                compressed = manifest["config"]["size"] + sum(layer["size"] for layer in manifest["layers"])
                client.images.remove(f"{repo}:{tag}", noprune=True)
                row = {"tag": tag, "uncompressed_bytes": image.attrs["Size"], "compressed_bytes": compressed,
                       "layers": len(manifest["layers"]), "push_to_localhost_s": round(push_s, 1)}
                results.append(row)
                print(f"{tag:<40} {row['uncompressed_bytes'] / 1e9:6.2f} GB uncompressed  "
                      f"{compressed / 1e9:6.2f} GB compressed  {row['layers']} layers", flush=True)
        finally:
            reg.terminate()
            reg.wait(timeout=30)
    out = ROOT / "bench" / "results" / "sizes.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {out.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
