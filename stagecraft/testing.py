"""Validate a built image with its testinfra suites, and keep a record of the result.

For one image: start a container (``sleep infinity`` under the image's entrypoint),
run ``pytest`` with ``--hosts=docker://<container>`` over the suites its stages and
framework declare, with the image's expectations (from matrix.yaml) in a JSON file
given by ``--stagecraft-spec``; remove the container whatever happens. The result is
recorded under ``<state>/test-records/<image id>.json``, keyed by image id, so that
publishing can refuse an image whose current id has not passed. Before the suites run, the
image's CycloneDX SBOM is read from the image and written to ``<state>/sbom/<image
id>.cdx.json``; the SBOM suite checks it against what is installed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from . import containers, signing, statefile, suitecases
from .engine import Engine
from .errors import BuildError, InputError
from .expand import ImageSpec
from .model import Matrix
from .platforms import host_platform
from .render import MANIFEST_PATH, image_manifest
from .safetext import clip

# The directory that holds this stagecraft package. The suites import it (tests/image
# reads the platform table), and they run with the project's root as their directory,
# which for a project of its own is not this checkout.
PACKAGE_HOME = Path(__file__).resolve().parent.parent


def suite_environ(environ: dict[str, str]) -> dict[str, str]:
    """The suites' environment: ``environ`` with ``PACKAGE_HOME`` first on PYTHONPATH
    where it is a checkout (it holds build.py), so they import the stagecraft that runs
    them, not another checkout's editable install (or none, when the project lies
    outside this checkout). An installed stagecraft (site-packages) is left as it is:
    put on PYTHONPATH, site-packages would come before the standard library."""
    if not (PACKAGE_HOME / "build.py").is_file():
        return dict(environ)
    rest = [p for p in environ.get("PYTHONPATH", "").split(os.pathsep)
            if p and p != str(PACKAGE_HOME)]
    return {**environ, "PYTHONPATH": os.pathsep.join([str(PACKAGE_HOME), *rest])}


@dataclass
class TestResult:
    """Outcome of one image's suites: ``passed`` is True when pytest exited 0;
    ``counts`` from its summary; ``seconds`` of wall time (every attempt); ``junit``
    path; ``failures``: what failed."""

    tag: str
    image_id: str
    passed: bool
    counts: dict[str, int]
    seconds: float
    suites: list[str]
    junit: str
    output_tail: str
    platform: str = ""
    # The checks that failed, ``module::test: message`` (at most 10, each message
    # clipped): what a run's output names, as the counts alone do not.
    failures: list[str] = field(default_factory=list)


def expectations(matrix: Matrix, spec: ImageSpec, ref: str, image_id: str,
                 platform: str = "") -> dict[str, Any]:
    """What the suites check the image against, all taken from the matrix; ``platform``
    (``linux/arm64``) the image is for ('' for the host's)."""
    from . import stagelock

    return {
        "tag": spec.tag,
        "ref": ref,
        "image_id": image_id,
        "platform": platform or host_platform(),
        "repository": matrix.repository,
        "base": spec.base,
        "framework": spec.framework,
        "components": spec.components,
        "chain": list(spec.chain),
        "manifest": image_manifest(matrix, spec, platform),
        "manifest_path": MANIFEST_PATH,
        "entrypoint": matrix.entrypoint,
        # The pins the image carries for pip (the lock's, or the matrix's).
        "constraints": stagelock.runtime_pins(matrix, spec, platform),
    }


def combine(results: list[TestResult], image_id: str) -> TestResult:
    """One result for a tag tested on several platforms (an index ``image_id``): passed
    when every platform passed; counts and seconds summed; platforms comma-joined."""
    counts: dict[str, int] = {}
    for r in results:
        for k, n in r.counts.items():
            counts[k] = counts.get(k, 0) + n
    failed = [r for r in results if not r.passed]
    return TestResult(tag=results[0].tag, image_id=image_id, passed=not failed, counts=counts,
                      seconds=sum(r.seconds for r in results), suites=results[0].suites,
                      junit=",".join(r.junit for r in results),
                      output_tail=(failed or results)[-1].output_tail,
                      platform=",".join(r.platform for r in results),
                      failures=[f for r in results for f in r.failures][:10])


def sbom_path(state_dir: Path, image_id: str) -> Path:
    """Where the CycloneDX SBOM of ``image_id`` lives."""
    return state_dir / "sbom" / f"{image_id.replace(':', '-')}.cdx.json"


def write_sbom(engine: Engine, matrix: Matrix, spec: ImageSpec, ref: str, image_id: str,
               state_dir: Path) -> Path:
    """Read what image ``image_id`` has installed and write its CycloneDX SBOM (with
    matrix.lock's hashes) to the state dir; returns the path."""
    from . import lockfile, sbom

    attrs = engine.inspect(image_id)
    labels = (attrs.get("Config") or {}).get("Labels") or {}
    created = labels.get("org.opencontainers.image.created") or attrs.get("Created", "")[:19] + "Z"
    inv = sbom.inventory(engine, image_id, name=ref)
    text = sbom.make_bom(inv, lockfile.load_for(matrix), ref, image_id, created,
                         f"{spec.base['os']}-{spec.base['version']}")
    path = sbom_path(state_dir, image_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    statefile.write_atomic(path, text)
    return path


def record_path(state_dir: Path, image_id: str) -> Path:
    """Where the test record of ``image_id`` lives."""
    return state_dir / "test-records" / f"{image_id.replace(':', '-')}.json"


def load_record(state_dir: Path, image_id: str) -> dict[str, Any] | None:
    """The test record of an image id, or None when it was never tested. Raises
    ``statefile.Unreadable`` for a record that is not whole (an older version wrote them
    in place, so a run killed mid-write left half a file): never taken as a pass."""
    return statefile.read_json(record_path(state_dir, image_id))


def _counts(output: str) -> dict[str, int]:
    import re

    counts: dict[str, int] = {}
    for line in output.splitlines()[::-1]:
        found = re.findall(r"(\d+) (passed|failed|error|errors|skipped|xfailed|xpassed)", line)
        if found:
            for n, word in found:
                counts[word.rstrip("s") if word == "errors" else word] = int(n)
            break
    return counts


def image_platform(attrs: dict[str, Any]) -> str:
    """``os/arch`` of an image from ``docker image inspect`` (``linux/arm64``)."""
    return f"{attrs.get('Os', 'linux')}/{attrs.get('Architecture', '')}"


# What runs the suites (module -> distribution): runtime dependencies in pyproject.toml.
TOOLS = {"pytest": "pytest", "testinfra": "pytest-testinfra"}
# pytest's exit statuses that are a verdict on the image: 0 every test passed, 1 some
# failed. The others (2 interrupted or a collection error, 3 internal error, 4 usage
# error, 5 no tests collected; https://docs.pytest.org/en/stable/reference/exit-codes.html)
# say the suites did not run: no record is written for those.
VERDICTS = (0, 1)


def check_tools() -> None:
    """Raise ``InputError`` (one line, exit 2) when this Python lacks what the suites
    run on, before any container starts or any record is written."""
    import importlib.util

    missing = [dist for mod, dist in TOOLS.items() if importlib.util.find_spec(mod) is None]
    if missing:
        raise InputError.one("build.py test", f"{sys.executable} has no {', '.join(missing)} "
                             "(the suites run on them)", "install stagecraft with its "
                             "dependencies: pip install . (in the project directory)")


def _no_verdict(returncode: int, output: str) -> Exception:
    """The error for a pytest run that gave no verdict on the image (see ``VERDICTS``)."""
    import re

    missing = re.search(r"ModuleNotFoundError: No module named '([^']+)'", output)
    if missing:
        return InputError.one("build.py test", f"the suites need the Python module "
                              f"{missing.group(1)!r}, which {sys.executable} lacks",
                              "install it (pip install ...) and run the tests again; "
                              "no test record was written")
    last = next((ln for ln in reversed(output.strip().splitlines()) if ln.strip()), "no output")
    return BuildError(f"pytest gave no verdict (exit {returncode}: {last.strip()[:200]}); "
                      "no test record was written")


# Suite runs of one image at most: a run with a check the engine failed (it could not
# start a process in the test container: suitecases) runs once more, in a new one.
ATTEMPTS = 2


def run_suites(engine: Engine, matrix: Matrix, spec: ImageSpec, ref: str,
               state_dir: Path, extra_args: list[str] | None = None,
               image: str | None = None, say: Callable[[str], None] | None = None) -> TestResult:
    """Run ``spec``'s suites against image ``ref`` (or ``image``, one platform's image
    of the tag ``ref`` when it is an index); record and return the result. Raises
    ``InputError`` when pytest or testinfra is missing, and ``InputError``/``BuildError``
    when pytest gives no verdict (a missing module, a usage error): no record then. The
    image's own platform decides the expectations (its kernel sets); another platform
    than the host's runs under emulation.

    A run with a check that failed because the engine could not start a process in the
    test container (``suitecases.engine_failed``) is no verdict on the image: the
    suites run again in a new container (``say`` is told why), and when the engine fails
    a check so again, ``BuildError`` says so and no record is written."""
    check_tools()
    image_id = engine.image_id(image or ref) or ""
    platform = image_platform(engine.inspect(image_id)) if image_id else ""
    reports = state_dir / "test-reports"
    reports.mkdir(parents=True, exist_ok=True)
    junit = reports / f"{spec.tag}{'' if platform == host_platform() else '@' + platform.replace('/', '-')}.xml"
    sbom = write_sbom(engine, matrix, spec, ref, image_id, state_dir)
    t0 = time.monotonic()
    for attempt in range(1, ATTEMPTS + 1):
        junit.unlink(missing_ok=True)  # what is read after the run is this run's report
        proc = _run_once(engine, matrix, spec, ref, image_id, platform, junit, sbom, extra_args)
        output = proc.stdout + proc.stderr
        if proc.returncode not in VERDICTS:
            raise _no_verdict(proc.returncode, output)
        failed = _failed(junit) if proc.returncode != 0 else []
        refused = [c for c in failed if suitecases.engine_failed(c)]
        if not refused:
            break
        why = (f"the engine could not start a process in the test container of {spec.tag} "
               f"({len(refused)} check(s) failed so: {clip(refused[0].message, 300)})")
        if attempt == ATTEMPTS:
            raise BuildError(f"{why}, in {ATTEMPTS} containers one after the other: no verdict on the "
                             "image and no test record was written; check the engine (docker info, "
                             "its log) and run the tests again")
        if say is not None:
            say(f"  {why}: no verdict on the image; the suites run again in a new container")
    result = TestResult(tag=spec.tag, image_id=image_id, passed=proc.returncode == 0,
                        counts=_counts(output), seconds=time.monotonic() - t0,
                        suites=list(spec.tests), junit=str(junit),
                        output_tail="\n".join(output.strip().splitlines()[-40:]),
                        platform=platform, failures=[f"{c.test}: {clip(c.message, 500)}" for c in failed[:10]])
    save_record(state_dir, result)
    return result


def _failed(junit: Path) -> list[suitecases.FailedCase]:
    """The failed cases of a run's report; [] when it cannot be read (the verdict then
    stands as pytest gave it)."""
    try:
        return suitecases.failed_cases(junit)
    except (OSError, ValueError):
        return []


def _run_once(engine: Engine, matrix: Matrix, spec: ImageSpec, ref: str, image_id: str,
              platform: str, junit: Path, sbom: Path,
              extra_args: list[str] | None) -> subprocess.CompletedProcess:
    """One run of the suites in a container of their own, removed after it whatever
    happens. Raises ``BuildError`` when the container was lost while they ran (no
    verdict on the image)."""
    from . import lockfile

    suites = [str(matrix.root / t) for t in spec.tests]
    name = f"stagecraft-test-{spec.tag}-{uuid.uuid4().hex[:8]}"
    labels = container_labels(spec.tag)
    container = containers.create(engine.client, image_id, "test", tag=spec.tag, sweep_first=False,
                                  command=["sleep", "infinity"], name=name,
                                  environment={"STAGECRAFT_QUIET": "1"})
    spec_file = ""
    try:
        containers.start(container)
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump({**expectations(matrix, spec, ref, image_id, platform), "sbom": str(sbom),
                       "locked": lockfile.lock_path(matrix).is_file(),
                       "container_labels": labels}, f, sort_keys=True)
            spec_file = f.name
        argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
                f"--rootdir={matrix.root}", f"--hosts=docker://{container.id}",
                f"--stagecraft-spec={spec_file}", f"--junitxml={junit}",
                *(extra_args or []), *suites]
        proc = subprocess.run(argv, cwd=matrix.root, env=suite_environ(os.environ),
                              capture_output=True, text=True)
        lost = "" if proc.returncode == 0 else _container_lost(container)
    finally:
        containers.remove(container)
        if spec_file:
            Path(spec_file).unlink(missing_ok=True)
    if lost:  # no verdict on the image: its suites lost the container they ran in
        raise BuildError(f"the suites of {spec.tag} could not run to their end: their container "
                         f"{name} is {lost} (the engine restarted, or something stopped it); "
                         "no test record was written: run the tests again")
    return proc


def container_labels(tag: str) -> dict[str, str]:
    """The labels of every container a suite run makes (its own, and those the suites
    start: ``spec["container_labels"]``), so that ``containers.sweep`` finds them all
    when the run was killed before it could remove them."""
    return containers.labels("test", tag)


def _container_lost(container: Any) -> str:
    """"" while the suites' container still runs; else its state in a word or two."""
    import docker

    try:
        container.reload()
    except docker.errors.NotFound:
        return "gone"
    except docker.errors.DockerException:
        return "unreachable"
    status = container.attrs.get("State", {}).get("Status", "")
    return "" if status == "running" else status or "not running"


def save_record(state_dir: Path, result: TestResult) -> None:
    """Record ``result`` under its image id (what publishing checks)."""
    rec = record_path(state_dir, result.image_id)
    rec.parent.mkdir(parents=True, exist_ok=True)
    signing.sig_path(rec).unlink(missing_ok=True)  # the old signature goes before the new record
    statefile.write_atomic(rec, json.dumps({**asdict(result), "recorded": time.time()}, indent=2))
    _sign_record(state_dir, rec)


def _sign_record(state_dir: Path, rec: Path) -> None:
    """With a signing key configured (STAGECRAFT_COSIGN_KEY), sign the record as it is
    written: `push` then signs an image only while its record still matches."""
    import os

    from . import tools

    sig = signing.sig_path(rec)
    key = signing.key_path(None)
    if key is None:
        return
    cosign = tools.ensure(state_dir)["cosign"]
    signing.public_key(cosign, key, "STAGECRAFT_COSIGN_KEY")
    signing.sign_record(cosign, key, rec)
    os.chmod(sig, 0o644)
