#!/usr/bin/env python3
"""Image sizes: uncompressed (as the engine reports) and compressed (as a registry
stores them: the sum of the gzip layer blobs and the config in the pushed manifest).

    python bench/sizes.py [--repository R] [--layers REGEX] [-o FILE] [TAG ...]
                                           (default: every built tag of matrix.yaml)

Starts Debian's `docker-registry` on a free 127.0.0.1 port with storage in a scratch
directory, pushes each image there, reads its manifest through the registry HTTP API v2
(https://distribution.github.io/distribution/spec/api/), then stops the registry and
removes the temporary tags. Writes bench/results/sizes.json (or FILE), with every layer's command,
uncompressed size (the engine's history) and compressed size (its blob in the manifest,
aligned through the image config's history, whose `empty_layer` entries have no blob).
`--layers REGEX` also prints the layers whose command matches (e.g. `libgl1` for the
toolkit libraries, `toolkit-constraints` for the PaddleOCR stage).
"""

from __future__ import annotations

import argparse
import json
import re
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


def layer_sizes(client: docker.DockerClient, image_id: str, config: dict, manifest: dict) -> list[dict]:
    """Each layer of the image, oldest first: command, uncompressed and compressed bytes.
    The engine's history (newest first) and the config's history have one entry per
    instruction; only non-empty entries have a blob in the manifest, in the same order."""
    engine = list(reversed(client.api.history(image_id)))
    history = config.get("history", [])
    if len(engine) != len(history):
        return []
    blobs = iter(manifest["layers"])
    out = []
    for mine, entry in zip(engine, history, strict=True):
        if entry.get("empty_layer"):
            continue
        out.append({"created_by": entry.get("created_by") or "",
                    "uncompressed_bytes": mine.get("Size", 0), "compressed_bytes": next(blobs)["size"]})
    return out


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="bench/sizes.py")
    ap.add_argument("--repository", help="repository of the tags (default: matrix.yaml's)")
    ap.add_argument("--layers", metavar="REGEX", help="also print the layers whose command matches")
    ap.add_argument("-o", "--output", default=str(ROOT / "bench" / "results" / "sizes.json"),
                    help="where to write the figures (default: bench/results/sizes.json)")
    ap.add_argument("tags", nargs="*")
    args = ap.parse_args(argv)
    matrix = load_matrix(ROOT / "matrix.yaml")
    repository = args.repository or matrix.repository
    client = docker.from_env(timeout=1800)
    tags = args.tags or [s.tag for s in expand(matrix)]
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
                ref = f"{repository}:{tag}"
                try:
                    image = client.images.get(ref)
                except docker.errors.ImageNotFound:
                    print(f"{tag}: not built, skipped", file=sys.stderr)
                    continue
                name = f"sizes/{repository.replace('/', '-')}"
                repo = f"127.0.0.1:{port}/{name}"
                image.tag(repo, tag)
                t0 = time.monotonic()
                for event in client.api.push(repo, tag, stream=True, decode=True):
                    if "error" in event:
                        sys.exit(f"push failed: {event['error']}")
                push_s = time.monotonic() - t0
                base = f"http://127.0.0.1:{port}/v2/{name}"
                req = urllib.request.Request(f"{base}/manifests/{tag}", headers={"Accept": MANIFEST_V2})
                manifest = json.load(urllib.request.urlopen(req))
                config = json.load(urllib.request.urlopen(f"{base}/blobs/{manifest['config']['digest']}"))
                compressed = manifest["config"]["size"] + sum(layer["size"] for layer in manifest["layers"])
                client.images.remove(f"{repo}:{tag}", noprune=True)
                row = {"tag": tag, "uncompressed_bytes": image.attrs["Size"], "compressed_bytes": compressed,
                       "layers": len(manifest["layers"]), "push_to_localhost_s": round(push_s, 1),
                       "layer_sizes": layer_sizes(client, image.id, config, manifest)}
                shown = [layer for layer in row["layer_sizes"]
                         if args.layers and re.search(args.layers, layer["created_by"])]
                for layer in row["layer_sizes"]:  # the record keeps the start of each command
                    layer["created_by"] = layer["created_by"][:300]
                results.append(row)
                print(f"{tag:<40} {row['uncompressed_bytes'] / 1e9:6.2f} GB uncompressed  "
                      f"{compressed / 1e9:6.2f} GB compressed  {row['layers']} layers", flush=True)
                for layer in shown:
                    print(f"  layer {layer['uncompressed_bytes'] / 1e6:8.1f} MB uncompressed "
                          f"{layer['compressed_bytes'] / 1e6:8.1f} MB compressed  "
                          f"{layer['created_by'][:90]}", flush=True)
        finally:
            reg.terminate()
            reg.wait(timeout=30)
    out = Path(args.output).resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
