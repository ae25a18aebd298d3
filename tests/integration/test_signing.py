"""Signed pushes against a real local registry (Debian's docker-registry), with cosign
and oras from Debian 13 (stagecraft/tools.py): a tested image pushed with a key has its
signature, its SBOM (attached as a referrer and attested) and its test record attested on
its digest, and `build.py verify` passes for it; it fails for an unsigned image, a tag
moved to another digest, and another key; a record edited after the test, a missing key
or a wrong password stop `push` before anything is pushed.

On each engine: Docker 20.10 makes no provenance (verify says "none attested"); on the
modern engine (BuildKit 0.13, containerd image store) BuildKit's SLSA provenance of the
image's last build is kept at build time, attached and attested with the rest, and
verify checks it is about that digest.

One small image (the six matrix, built once per engine; about 2 minutes cold, most of it
the build)."""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path

import pytest

from stagecraft import tools
from tests.integration import engines
from tests.integration.test_publish import _drop, _registry
from tests.unit.minimal_matrix import MINIMAL

# Unique per run: the image's last stage (its labels name the repository) is built in this
# run, so BuildKit's provenance of it is kept in this run's state directory.
REPO = f"stagecraft-it/signed-{uuid.uuid4().hex[:8]}"
PASSWORD = "it-signing-pw"


@pytest.fixture(scope="module")
def signed(tmp_path_factory, engine: engines.TestEngine):
    """Build and test 1.17.0-cpu with a signing key set, start a registry; yields a dict
    with paths, the registry and an `env` for the CLI."""
    import shutil

    from tests.conftest import ROOT

    root = tmp_path_factory.mktemp("signed")
    for name in ("templates", "entrypoint", "probes"):
        shutil.copytree(ROOT / name, root / name, ignore=shutil.ignore_patterns("__pycache__"))
    (root / "tests").symlink_to(ROOT / "tests")
    matrix = root / "matrix.yaml"
    matrix.write_text(MINIMAL.replace("repository: example/fw", f"repository: {REPO}"))
    state = root / ".state"
    kit = tools.ensure(state)
    env = {**engine.environ(), "COSIGN_PASSWORD": PASSWORD}
    if engine.modern:  # its registries listen on the engine's address, over plain HTTP
        env["STAGECRAFT_INSECURE_REGISTRY"] = "1"
    for name in ("signer", "other"):
        d = root / name
        d.mkdir()
        subprocess.run([kit["cosign"], "generate-key-pair"], cwd=d, env=env, check=True,
                       capture_output=True)
    env["STAGECRAFT_COSIGN_KEY"] = str(root / "signer/cosign.key")
    proc = _cli(matrix, env, "--tag", "1.17.0-cpu", "--test", "--state-dir", str(state))
    assert proc.returncode == 0, proc.stderr[-3000:]
    reg = _registry(tmp_path_factory, "signed-registry", False, engine)
    yield {"root": root, "matrix": matrix, "state": state, "env": env, "registry": reg,
           "kit": kit, "engine": engine}
    _drop(reg)


def _cli(matrix: Path, env: dict, *args: str) -> subprocess.CompletedProcess:
    import sys

    from tests.conftest import ROOT

    return subprocess.run([sys.executable, str(ROOT / "build.py"), "--matrix", str(matrix), *args],
                          cwd=matrix.parent, env=env, capture_output=True, text=True, timeout=1800)


def _push(s, *extra: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return _cli(s["matrix"], env or s["env"], "push", "--tag", "1.17.0-cpu", "--registry",
                s["registry"].host, "--state-dir", str(s["state"]), *extra)


def _verify(s, ref: str, key: str = "signer/cosign.pub") -> subprocess.CompletedProcess:
    return _cli(s["matrix"], s["env"], "verify", ref, "--key", str(s["root"] / key),
                "--state-dir", str(s["state"]))


def test_missing_key_or_wrong_password_pushes_nothing(signed):
    s = signed
    proc = _push(s, "--sign-key", str(s["root"] / "nope.key"))
    assert proc.returncode == 2 and "no such key file" in proc.stderr
    proc = _push(s, env={**s["env"], "COSIGN_PASSWORD": "wrong"})
    assert proc.returncode == 2 and "not a usable cosign private key" in proc.stderr
    assert s["registry"].tags(REPO) == []


def test_an_edited_record_is_refused(signed):
    s = signed
    records = sorted((s["state"] / "test-records").glob("*.json"))
    assert records and all(r.with_suffix(".sig").is_file() for r in records)
    rec = records[0]
    original = rec.read_text()
    doc = json.loads(original)
    doc["counts"] = {**doc["counts"], "passed": doc["counts"].get("passed", 0) + 1}
    rec.write_text(json.dumps(doc, indent=2))
    try:
        proc = _push(s)
        assert proc.returncode == 2, proc.stderr[-2000:]
        assert "the test record does not match its signature" in proc.stderr
        assert s["registry"].tags(REPO) == []
    finally:
        rec.write_text(original)


def test_signed_push_verifies_and_tampering_does_not(signed, eclient):
    s = signed
    client = eclient
    host = s["registry"].host
    modern = s["engine"].modern
    proc = _push(s)
    assert proc.returncode == 0, proc.stderr[-3000:]
    if modern:
        assert ("SBOM attached (OCI referrer), provenance attached (OCI referrer), signed, SBOM "
                "attested, test record attested, provenance attested") in proc.stderr
    else:
        assert "SBOM attached (OCI referrer), signed, SBOM attested, test record attested\n" in proc.stderr
    ref = f"{host}/{REPO}:1.17.0-cpu"
    proc = _verify(s, ref)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    assert [ln.split()[:2] for ln in lines[:4]] == [["ok", "signature"], ["ok", "sbom"], ["ok", "tests"],
                                                    ["ok", "provenance"]]
    assert ("SLSA provenance v0.2 by BuildKit" if modern else "none attested") in lines[3], lines
    assert lines[-1].startswith(f"verified: {ref}")
    digest = s["registry"].digest(REPO, "1.17.0-cpu")
    assert _verify(s, f"{host}/{REPO}@{digest}").returncode == 0
    if modern:  # BuildKit's statement, kept at build time, is about the pushed digest
        kept = json.loads((s["state"] / "provenance" / f"{digest.split(':')[1]}.intoto.json").read_text())
        assert kept["predicateType"] == "https://slsa.dev/provenance/v0.2"
        assert kept["subject"][0]["digest"]["sha256"] == digest.split(":")[1]
        assert kept["predicate"]["buildType"] == "https://mobyproject.org/buildkit@v1"

    # Another key: the signature does not verify.
    proc = _verify(s, ref, key="other/cosign.pub")
    assert proc.returncode == 1 and "FAIL signature" in proc.stdout

    # An unsigned image pushed by hand, and the signed tag moved onto it.
    base = next(i for i in client.images.list() if any(t.startswith("stagecraft-stage/base:") for t in i.tags))
    for tag in ("unsigned", "1.17.0-cpu"):
        base.tag(f"{host}/{REPO}", tag)
        for _ in client.api.push(f"{host}/{REPO}", tag, stream=True, decode=True):
            pass
        client.images.remove(f"{host}/{REPO}:{tag}", noprune=True)
        proc = _verify(s, f"{host}/{REPO}:{tag}")
        assert proc.returncode == 1, proc.stdout
        assert "FAIL signature" in proc.stdout and "NOT VERIFIED" in proc.stdout
    # The signed digest itself still verifies.
    assert _verify(s, f"{host}/{REPO}@{digest}").returncode == 0
    # A missing public key is bad input.
    assert _verify(s, ref, key="nope.pub").returncode == 2
