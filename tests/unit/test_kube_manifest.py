"""deploy/kubernetes/pod.yaml, the README's manifest: its probes run exactly the image's
HEALTHCHECK command (Kubernetes ignores HEALTHCHECK), on a tag the matrix builds, and it
keeps the image's entrypoint. tests/integration/test_kube.py plays it under Podman."""
from __future__ import annotations

import json
import re

import yaml

from stagecraft.bases import base_image
from stagecraft.expand import expand
from stagecraft.matrix import load_matrix
from stagecraft.plan import full_dockerfile
from tests.conftest import ROOT

MANIFEST = ROOT / "deploy" / "kubernetes" / "pod.yaml"


def _container() -> dict:
    pod = yaml.safe_load(MANIFEST.read_text())
    assert pod["kind"] == "Pod" and len(pod["spec"]["containers"]) == 1, MANIFEST
    return pod["spec"]["containers"][0]


def _healthcheck(tag: str) -> tuple[list[str], dict[str, str]]:
    """The HEALTHCHECK of ``tag``'s rendered Dockerfile: its CMD and its options."""
    matrix = load_matrix(ROOT / "matrix.yaml")
    spec = next((s for s in expand(matrix) if s.tag == tag or tag in s.aliases), None)
    assert spec is not None, f"{MANIFEST}: image tag {tag} is not in matrix.yaml"
    text = full_dockerfile(matrix, spec, base_image(spec.base, None, "linux/amd64"), "0" * 40, "1970-01-01T00:00:00Z")
    m = re.search(r"^HEALTHCHECK (.*?) \\\n\s+CMD (\[.*\])$", text, re.MULTILINE)
    assert m, f"{tag}: no HEALTHCHECK in the rendered Dockerfile"
    return json.loads(m.group(2)), dict(o.lstrip("-").split("=", 1) for o in m.group(1).split())


def test_probes_run_the_images_health_check() -> None:
    c = _container()
    cmd, opts = _healthcheck(c["image"].rpartition(":")[2])
    for kind in ("livenessProbe", "readinessProbe"):
        assert c[kind]["exec"]["command"] == cmd, f"{MANIFEST}: {kind} runs {c[kind]['exec']['command']}, the image {cmd}"
    live = c["livenessProbe"]
    assert f"{live['periodSeconds']}s" == opts["interval"] and f"{live['timeoutSeconds']}s" == opts["timeout"], (live, opts)
    assert str(live["failureThreshold"]) == opts["retries"], (live, opts)


def test_the_entrypoint_is_kept_and_the_root_is_read_only() -> None:
    """``command`` would replace the image's ENTRYPOINT: no probe, no report, and the
    health check would have nothing to check."""
    c = _container()
    assert "command" not in c and c.get("args"), f"{MANIFEST}: set args, not command"
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    assert {m["mountPath"] for m in c["volumeMounts"]} >= {"/tmp"}, "a read-only root needs a writable /tmp"
