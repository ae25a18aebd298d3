"""What a failed signing step says (stagecraft/signing.py): the tool's cause, kept whole.

cosign and oras here are stand-ins at the lowest level: executables that print what the
real ones print on a refused connection and exit 1."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from stagecraft import signing
from stagecraft.errors import BuildError

REF = "172.17.0.2:36918/stagecraft-faults/six@sha256:" + "f0e2b6557c13c12c" * 4
# cosign 2.x's words when the registry went away mid-attest (Go errors wrap outward).
COSIGN_ERROR = (f"Error: signing {REF}: getting remote image: Get \"http://{REF.split('@')[0]}"
                f"/manifests/sha256:{'f0e2b6557c13c12c' * 4}\": dial tcp 172.17.0.2:36918: "
                "connect: connection refused")


def _tool(path: Path, code: int, err: str = "") -> str:
    path.write_text(f"#!/bin/sh\nprintf '%s\\n' '{err}' >&2\nexit {code}\n")
    os.chmod(path, 0o755)
    return str(path)


def test_a_long_tool_error_keeps_its_cause(tmp_path):
    tools = {"oras": _tool(tmp_path / "oras", 0), "cosign": _tool(tmp_path / "cosign", 1, COSIGN_ERROR)}
    sbom, record = tmp_path / "sbom.json", tmp_path / "record.json"
    sbom.write_text("{}")
    record.write_text("{}")
    assert len(COSIGN_ERROR) > signing.LAST_CHARS
    with pytest.raises(BuildError) as got:
        signing.sign_pushed(tools, tmp_path / "cosign.key", REF, sbom, record, insecure=True)
    said = str(got.value)
    assert said.startswith(f"sign of {REF} failed: ...")
    assert said.endswith("connect: connection refused")


def test_a_short_tool_error_is_whole(tmp_path):
    tools = {"oras": _tool(tmp_path / "oras", 1, "Error: unexpected status 500"), "cosign": "/bin/false"}
    sbom, record = tmp_path / "sbom.json", tmp_path / "record.json"
    sbom.write_text("{}")
    record.write_text("{}")
    with pytest.raises(BuildError) as got:
        signing.sign_pushed(tools, tmp_path / "cosign.key", REF, sbom, record, insecure=True)
    assert str(got.value).endswith("failed: Error: unexpected status 500")


def test_the_push_line_keeps_what_failed_and_its_cause():
    """Found by the CI subset of the fault suite (seed 1796586866): the push's line was
    cut at 300 characters from its start, so `attest of REF failed: ...` lost the end
    of cosign's words, where the cause is."""
    from stagecraft.pipeline.buildrun import push_cause

    error = f"attest of {REF} failed: ...{COSIGN_ERROR[-297:]}"
    said = push_cause({"error": error})
    assert said.startswith(f"attest of {REF[:60]}") and said.endswith("connect: connection refused")
    ref = {"ref": "r:1", "status": "failed", "error": error}
    assert push_cause({"images": [{"push": ref}]}).endswith("connection refused")
