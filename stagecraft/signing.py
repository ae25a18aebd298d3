"""Signatures, attestations and the SBOM referrer of pushed images (cosign and oras from
Debian 13, see tools.py), and their verification.

Key-based and offline: a cosign key pair (``cosign generate-key-pair``), the private key
from ``--sign-key PATH`` or ``STAGECRAFT_COSIGN_KEY`` with its password in
``COSIGN_PASSWORD``; nothing is uploaded to a transparency log (``--tlog-upload=false``),
so verification skips the log (``--insecure-ignore-tlog``) and trusts the public key.

What one pushed digest gets (``sign_pushed``):

- the image's CycloneDX SBOM as an OCI artifact whose subject is the digest
  (``oras attach``; a registry without the referrers API gets oras' tag fallback);
- a cosign signature of the digest;
- two signed in-toto attestations on the digest: the SBOM (predicate type ``cyclonedx``)
  and the test record the push was gated on (``TEST_RECORD_TYPE``);
- where the image was built on an engine that makes it (BuildKit 0.13 through buildx
  with the containerd image store), BuildKit's SLSA provenance of the image's last build,
  attached (artifact type ``application/vnd.in-toto+json``) and attested
  (``slsaprovenance``).

The test record is itself signed when it is written (``sign_record``: ``build.py test``
with a key configured), and ``push`` signs nothing whose record's signature does not
verify: a record edited by hand after the test (a failed run turned into a pass) is
refused, so the signed test attestation only ever carries what the suites said.

``verify(ref, key)`` checks, for the digest ``ref`` names: the signature; the SBOM
attestation, that its subject is that digest and that the SBOM describes that image (its
root component's hash is the image's id where it was built: the config digest on the
classic image store, the manifest digest, which is the digest pushed, on the containerd
image store) and equals the attached SBOM; the test record attestation, that it passed
and is for that image's id; the
provenance attestation, when there is one, that its subject is that digest.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import BuildError, InputError
from .safetext import cut_start

TEST_RECORD_TYPE = "https://stagecraft.dev/attestations/test-record/v1"
SBOM_ARTIFACT_TYPE = "application/vnd.cyclonedx+json"
# BuildKit's SLSA provenance, an in-toto statement (predicate https://slsa.dev/provenance/v0.2).
PROVENANCE_ARTIFACT_TYPE = "application/vnd.in-toto+json"
PROVENANCE_TYPE = "https://slsa.dev/provenance/v0.2"


def key_path(option: str | None) -> Path | None:
    """The signing key: ``--sign-key`` or ``STAGECRAFT_COSIGN_KEY``; None when neither."""
    value = option or os.environ.get("STAGECRAFT_COSIGN_KEY")
    return Path(value) if value else None


def _run(argv: list[str], what: str, env: dict[str, str] | None = None,
         cwd: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, cwd=cwd,
                          env={**os.environ, **(env or {})}, timeout=300)


LAST_CHARS = 300  # of a tool's last line in a message


def _last(proc: subprocess.CompletedProcess) -> str:
    """The tool's last line, its end kept when it is long: cosign and oras are Go, whose
    errors wrap outward ("signing REF: getting remote image: Put URL: dial tcp ADDR:
    connect: connection refused"), so the cause is the end (the fault suite met one cut
    before it: the engine and its registry killed during a push's attest)."""
    lines = (proc.stderr + proc.stdout).strip().splitlines()
    return cut_start(lines[-1], LAST_CHARS) if lines else f"exit {proc.returncode}"


def public_key(cosign: str, key: Path, where: str = "--sign-key") -> str:
    """The PEM public key of private key ``key`` (password from COSIGN_PASSWORD). Raises
    ``InputError`` (exit 2) when the file is missing or cannot be decrypted."""
    if not key.is_file():
        raise InputError.one(f"{where} {key}", "no such key file",
                             "create one with `cosign generate-key-pair` or fix the path")
    proc = _run([cosign, "public-key", "--key", str(key)], "cosign public-key")
    if proc.returncode != 0 or "PUBLIC KEY" not in proc.stdout:
        raise InputError.one(f"{where} {key}", f"not a usable cosign private key ({_last(proc)})",
                             "check the file and COSIGN_PASSWORD")
    return proc.stdout


def sig_path(record: Path) -> Path:
    """Where the signature of a test record lives."""
    return record.with_suffix(".sig")


def sign_record(cosign: str, key: Path, record: Path) -> Path:
    """Sign a test record file (``cosign sign-blob``, offline); returns the signature path."""
    out = sig_path(record)
    proc = _run([cosign, "sign-blob", "--key", str(key), "--tlog-upload=false", "-y",
                 "--output-signature", str(out), str(record)], "cosign sign-blob")
    if proc.returncode != 0:
        raise BuildError(f"signing the test record {record} failed: {_last(proc)}")
    return out


def check_record(cosign: str, pub_pem: str, record: Path) -> str:
    """Empty when ``record`` carries a valid signature by the key of ``pub_pem``, else why not."""
    sig = sig_path(record)
    if not sig.is_file():
        return "the test record is not signed (run the tests with STAGECRAFT_COSIGN_KEY set)"
    with tempfile.NamedTemporaryFile("w", suffix=".pub", delete=False) as f:
        f.write(pub_pem)
    try:
        proc = _run([cosign, "verify-blob", "--key", f.name, "--signature", str(sig),
                     "--insecure-ignore-tlog=true", str(record)], "cosign verify-blob")
    finally:
        os.unlink(f.name)
    return "" if proc.returncode == 0 else "the test record does not match its signature " \
        "(edited after the test, or signed with another key)"


def _http_flags(insecure: bool) -> tuple[list[str], list[str]]:
    if not insecure:
        return [], []
    return ["--plain-http"], ["--allow-http-registry", "--allow-insecure-registry"]


def sign_pushed(tools: dict[str, str], key: Path, ref_at_digest: str, sbom: Path,
                record: Path, insecure: bool, provenance: Path | None = None) -> list[str]:
    """Attach the SBOM (and BuildKit's provenance statement, when given) to the pushed
    digest, sign the digest and attest SBOM, test record (and provenance) on it. Returns
    what was done, one line each. Raises ``BuildError``."""
    oras_http, cosign_http = _http_flags(insecure)
    done = []
    with tempfile.TemporaryDirectory(prefix="stagecraft-sign-") as tmp:
        files = [("SBOM", "sbom.cdx.json", SBOM_ARTIFACT_TYPE, sbom)]
        if provenance is not None:
            files.append(("provenance", "provenance.intoto.json", PROVENANCE_ARTIFACT_TYPE, provenance))
        for what, name, kind, src in files:
            Path(tmp, name).write_bytes(src.read_bytes())
            proc = _run([tools["oras"], "attach", *oras_http, "--artifact-type", kind,
                         ref_at_digest, f"{name}:{kind}"], "oras attach", cwd=tmp)
            if proc.returncode != 0:
                raise BuildError(f"attaching the {what} to {ref_at_digest} failed: {_last(proc)}")
            done.append(f"{what} attached (OCI referrer)")
        predicate = Path(tmp, "provenance.predicate.json")
        if provenance is not None:
            statement = json.loads(provenance.read_text())
            subject = {s.get("digest", {}).get("sha256") for s in statement.get("subject", [])}
            if ref_at_digest.rsplit("@sha256:", 1)[-1] not in subject:
                raise BuildError(f"the provenance kept for this image is about {sorted(subject)}, "
                                 f"not {ref_at_digest}")
            predicate.write_text(json.dumps(statement.get("predicate") or {}))
        steps = [
            ("signed", [tools["cosign"], "sign", "--key", str(key), "--tlog-upload=false", "-y",
                        *cosign_http, ref_at_digest]),
            ("SBOM attested", [tools["cosign"], "attest", "--key", str(key), "--tlog-upload=false",
                               "-y", *cosign_http, "--type", "cyclonedx", "--predicate", str(sbom),
                               ref_at_digest]),
            ("test record attested", [tools["cosign"], "attest", "--key", str(key),
                                      "--tlog-upload=false", "-y", *cosign_http, "--type",
                                      TEST_RECORD_TYPE, "--predicate", str(record), ref_at_digest]),
        ]
        if provenance is not None:
            steps.append(("provenance attested", [
                tools["cosign"], "attest", "--key", str(key), "--tlog-upload=false", "-y",
                *cosign_http, "--type", "slsaprovenance", "--predicate", str(predicate),
                ref_at_digest]))
        for what, argv in steps:
            proc = _run(argv, argv[1])
            if proc.returncode != 0:
                raise BuildError(f"{argv[1]} of {ref_at_digest} failed: {_last(proc)}")
            done.append(what)
    return done


@dataclass
class Verification:
    """What ``verify`` found: ``digest`` checked, ``checks`` (name, ok, detail), ``ok``."""

    ref: str
    digest: str = ""
    checks: list[tuple[str, bool, str]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when every check passed (and there was at least one)."""
        return bool(self.checks) and all(ok for _, ok, _ in self.checks)


def _attestation(tools: dict[str, str], pub: Path, ref: str, kind: str,
                 cosign_http: list[str]) -> tuple[dict[str, Any] | None, str]:
    proc = _run([tools["cosign"], "verify-attestation", "--key", str(pub),
                 "--insecure-ignore-tlog=true", *cosign_http, "--type", kind, ref],
                "cosign verify-attestation")
    if proc.returncode != 0:
        return None, _last(proc)
    statements = []
    for line in proc.stdout.splitlines():
        if line.strip():
            env = json.loads(line)
            statements.append(json.loads(base64.b64decode(env["payload"])))
    if not statements:
        return None, "no attestation"
    return statements[-1], ""


def verify(tools: dict[str, str], ref: str, pub: Path, insecure: bool) -> Verification:
    """Verify the signature, SBOM and test record of the digest ``ref`` names (a tag or
    ``@sha256:...``). Raises ``InputError`` when ``pub`` is missing."""
    if not pub.is_file():
        raise InputError.one(f"--key {pub}", "no such public key file",
                             "pass the cosign.pub of the signing key")
    oras_http, cosign_http = _http_flags(insecure)
    v = Verification(ref)
    proc = _run([tools["oras"], "resolve", *oras_http, ref], "oras resolve")
    if proc.returncode != 0:
        v.checks.append(("resolve", False, _last(proc)))
        return v
    v.digest = proc.stdout.strip()
    repo = ref.split("@", 1)[0]
    if ":" in repo.rsplit("/", 1)[-1]:
        repo = repo.rsplit(":", 1)[0]
    at = f"{repo}@{v.digest}"
    proc = _run([tools["oras"], "manifest", "fetch", *oras_http, at], "oras manifest fetch")
    config = json.loads(proc.stdout).get("config", {}).get("digest", "") if proc.returncode == 0 else ""
    proc = _run([tools["cosign"], "verify", "--key", str(pub), "--insecure-ignore-tlog=true",
                 *cosign_http, at], "cosign verify")
    v.checks.append(("signature", proc.returncode == 0,
                     "valid for this key" if proc.returncode == 0 else _last(proc)))
    # The image's id where it was built: its config digest (classic image store) or its
    # manifest digest, the digest pushed (containerd image store).
    ids = {i for i in (config, v.digest) if i}
    # The SBOM: signed, bound to this digest, describing this image, and the one attached.
    stmt, why = _attestation(tools, pub, at, "cyclonedx", cosign_http)
    if stmt is None:
        v.checks.append(("sbom", False, f"no valid SBOM attestation: {why}"))
    else:
        subject = {s["digest"].get("sha256") for s in stmt.get("subject", [])}
        bom = stmt.get("predicate") or {}
        root = ((bom.get("metadata") or {}).get("component") or {}).get("hashes") or []
        describes = any(f"sha256:{h.get('content')}" in ids for h in root) and config
        attached = _attached_sbom(tools, at, oras_http)
        ok = v.digest.split(":")[-1] in subject and bool(describes) and attached == bom
        detail = (f"{len(bom.get('components', []))} components, for image {config[:19]}" if ok else
                  "subject is not this digest" if v.digest.split(":")[-1] not in subject else
                  "it describes another image" if not describes else
                  "the attached SBOM differs from the signed one" if attached is not None else
                  "no SBOM attached to this digest")
        v.checks.append(("sbom", ok, detail))
    stmt, why = _attestation(tools, pub, at, TEST_RECORD_TYPE, cosign_http)
    if stmt is None:
        v.checks.append(("tests", False, f"no valid test record attestation: {why}"))
    else:
        rec = stmt.get("predicate") or {}
        ok = rec.get("passed") is True and rec.get("image_id") in ids and bool(config)
        detail = (f"passed {rec.get('counts')} for image {rec.get('image_id', '')[:19]}" if ok else
                  "the record is for another image" if rec.get("image_id") not in ids else
                  f"the tests did not pass {rec.get('counts')}")
        v.checks.append(("tests", ok, detail))
    # BuildKit's provenance, where the image was built on an engine that makes it: signed
    # and about this digest. None attested is said, not failed (Docker 20.10 makes none).
    stmt, why = _attestation(tools, pub, at, "slsaprovenance", cosign_http)
    if stmt is None:
        v.checks.append(("provenance", True, "none attested (built where BuildKit makes none)"))
    else:
        subject = {s["digest"].get("sha256") for s in stmt.get("subject", [])}
        builder = ((stmt.get("predicate") or {}).get("builder") or {}).get("id", "")
        ok = v.digest.split(":")[-1] in subject and stmt.get("predicateType") == PROVENANCE_TYPE
        v.checks.append(("provenance", ok, f"SLSA provenance v0.2 by BuildKit{f' ({builder})' if builder else ''}"
                         if ok else "its subject is not this digest"))
    return v


def _attached_sbom(tools: dict[str, str], at: str, oras_http: list[str]) -> dict[str, Any] | None:
    proc = _run([tools["oras"], "discover", *oras_http, "--format", "json",
                 "--artifact-type", SBOM_ARTIFACT_TYPE, at], "oras discover")
    if proc.returncode != 0:
        return None
    doc = json.loads(proc.stdout)
    found = doc.get("manifests") or doc.get("referrers") or []
    if not found:
        return None
    repo = at.split("@", 1)[0]
    with tempfile.TemporaryDirectory(prefix="stagecraft-verify-") as tmp:
        proc = _run([tools["oras"], "pull", *oras_http, "-o", tmp,
                     f"{repo}@{found[-1]['digest']}"], "oras pull")
        files = sorted(Path(tmp).glob("*.json"))
        if proc.returncode != 0 or not files:
            return None
        return json.loads(files[0].read_text())


def sha256_file(path: Path) -> str:
    """``sha256:<hex>`` of a file's bytes."""
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()
