"""The engines the integration tests run on, and what each one builds.

- ``host``: the engine of the environment (DOCKER_HOST as the caller has it; on this
  project's machines Debian 12's Docker 20.10, BuildKit 0.8 through the classic builder).
- ``modern``: Docker 26 + buildx 0.13 with the containerd image store (Debian 13
  packages), run beside it by ``scripts/modern-engine.sh`` (``make test`` starts it
  through scripts/setup.sh; the first test that needs it runs ``up`` too, a no-op when it
  answers). Selected by ``DOCKER_HOST=unix:///var/lib/stagecraft/stagecraft-modern/
  sock/docker.sock`` and ``DOCKER_CONFIG`` (buildx as a CLI plugin), as any user would.

Tests take the ``engine`` fixture (parametrized per engine, ids ``host``/``modern``, and
marked with the pytest marker of the same name: ``pytest -m modern``).
``STAGECRAFT_TEST_ENGINES=host`` (comma-separated) limits the run to those engines.

The modern engine builds, of the CPU images of the matrix, the first of each stage chain
(``modern_tags``: today 2.6.2-cpu and 2.6.2-cpu-jupyter, which share their base and
runtime stages, and 3.3.1-cpu-debian12-paddleocr): every stage template and every engine-dependent path (buildx, the
containerd image store, its sizes and digests) is exercised there, while the other
images, the GPU ones (3 to 10 GB unpacked each) among them, are built and tested on the
host engine alone. That keeps a cold CI run within its time budget.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import docker

ROOT = Path(__file__).resolve().parents[2]
ENGINES = ("host", "modern")


def selected() -> tuple[str, ...]:
    """The engines this run tests (``STAGECRAFT_TEST_ENGINES``, default all)."""
    wanted = [e.strip() for e in os.environ.get("STAGECRAFT_TEST_ENGINES", ",".join(ENGINES)).split(",")]
    unknown = [e for e in wanted if e not in ENGINES]
    if unknown:
        raise ValueError(f"STAGECRAFT_TEST_ENGINES: unknown engine(s) {unknown}; known: {ENGINES}")
    return tuple(e for e in ENGINES if e in wanted)


@dataclass(frozen=True)
class TestEngine:
    """One engine: ``env`` selects it for a subprocess (added to the environment);
    ``address`` is where the host reaches what the engine publishes (ports of its
    containers, registries in its network namespace); ``container`` the modern engine's
    own container; ``share`` a host directory its container sees as /stagecraft/share;
    ``registry`` its cache registry as the engine reaches it (modern: 127.0.0.1:5000)."""

    __test__ = False  # not a test class

    name: str
    env: dict[str, str] = field(default_factory=dict)
    address: str = "127.0.0.1"
    container: str = ""
    share: Path | None = None
    registry: str = ""
    registry_from_host: str = ""

    @property
    def modern(self) -> bool:
        """True for the modern engine."""
        return self.name == "modern"

    def environ(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        """The full environment of a subprocess on this engine."""
        return {**os.environ, **self.env, **(extra or {})}

    def client(self) -> docker.DockerClient:
        """A docker SDK client of this engine."""
        if "DOCKER_HOST" in self.env:
            return docker.DockerClient(base_url=self.env["DOCKER_HOST"], timeout=600)
        return docker.from_env(timeout=600)

    def cli(self, *args: str, timeout: float = 3600, cwd: Path = ROOT,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        """``python build.py ARGS`` on this engine, as a user would run it."""
        return subprocess.run([sys.executable, str(ROOT / "build.py"), *args], cwd=cwd,
                              capture_output=True, text=True, timeout=timeout,
                              env=self.environ(env))

    def builds(self, spec) -> bool:
        """Whether this engine builds and tests ``spec`` (an ``ImageSpec``): every image
        on the host engine; on the modern one those of ``modern_tags``."""
        return not self.modern or spec.tag in modern_tags()


@cache
def modern_tags() -> frozenset[str]:
    """The tags the modern engine builds: of the CPU images this host can build, in
    matrix order, the first of each stage chain."""
    from tests.integration.harness import SPECS, buildable_here

    tags, _ = buildable_here()
    chains: dict[tuple[str, ...], str] = {}
    for spec in SPECS:
        if spec.tag in tags and spec.framework.get("device") == "cpu":
            chains.setdefault(spec.chain, spec.tag)
    return frozenset(chains.values())


def modern_env(name: str = "stagecraft-modern", action: str = "up") -> dict[str, str]:
    """``scripts/modern-engine.sh up`` (a no-op when it answers; ``reset``: a fresh
    engine state, its registry kept) for the engine called ``name``, then its variables.
    Raises RuntimeError with the script's own message when it cannot start."""
    script = ROOT / "scripts" / "modern-engine.sh"
    env = {**os.environ, "STAGECRAFT_MODERN_NAME": name}
    up = subprocess.run(["bash", str(script), action], capture_output=True, text=True,
                        timeout=900, env=env)
    if up.returncode != 0:
        raise RuntimeError(f"the modern engine {name} did not start: {up.stderr.strip()[-1500:]}")
    out = subprocess.run(["bash", str(script), "env"], capture_output=True, text=True,
                         timeout=60, check=True, env=env).stdout
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def modern(name: str, action: str = "up") -> TestEngine:
    """The modern engine called ``name`` (a container of its own, ``modern_env``),
    started or reset by ``action``. Raises RuntimeError when it cannot start."""
    return _modern("modern", modern_env(name, action))


def _modern(name: str, env: dict[str, str]) -> TestEngine:
    return TestEngine(name, {k: env[k] for k in ("DOCKER_HOST", "DOCKER_CONFIG")},
                      address=env["STAGECRAFT_MODERN_ADDRESS"],
                      container=env["STAGECRAFT_MODERN_NAME"],
                      share=Path(env["STAGECRAFT_MODERN_SHARE"]),
                      registry=env["STAGECRAFT_MODERN_REGISTRY"],
                      registry_from_host=env["STAGECRAFT_MODERN_REGISTRY_FROM_HOST"])


# One runner engine per checkout: test runs of two checkouts on one machine (each resets
# its runner) do not disturb each other.
RUNNER = "stagecraft-runner-" + hashlib.sha256(str(ROOT).encode()).hexdigest()[:8]


def fresh_runner() -> TestEngine:
    """A CI runner as it starts: the modern engine ``RUNNER`` (a second container of the
    same image, this checkout's own) reset to a fresh state (no images, no build cache),
    its registry (127.0.0.1:5000 inside) kept: what runners share."""
    return _modern("modern", modern_env(RUNNER, "reset"))


# The multi-platform tests' own engine (test_platforms_emulated.py): a third container of
# the modern engine image, so that its long emulated build can run while other tests
# count the images of the shared modern engine.
PLATFORMS = "stagecraft-platforms"


@cache
def get(name: str) -> TestEngine:
    """The engine called ``name``: ``host``, ``modern`` or ``platforms`` (the modern
    engine ``PLATFORMS``); a modern one is started on first use. Raises RuntimeError
    when it cannot start."""
    if name == "host":
        return TestEngine("host")
    if name == "platforms":
        return _modern("modern", modern_env(PLATFORMS))
    return _modern("modern", modern_env())
