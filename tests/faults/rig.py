"""What the fault suite drives and owns: an engine, a project, a state directory, a
registry and a proxy in front of it; and how it looks at them.

- **The engine** is a modern engine of the suite's own (``scripts/modern-engine.sh``
  with ``STAGECRAFT_MODERN_NAME`` the project's ``name``: Docker 26, the containerd image
  store), never the host's engine, so killing and restarting it disturbs nobody's work.
  Its data root (/var/lib/docker) is an ext4 file system on a loop device (the
  project's ``disk_bytes``), so a trial can fill it to the last bytes.
- **The project** (``PROJECTS``, ``--project``) is one of two:
  - ``six`` (``SIX``, the default): the tests' small ``six`` matrix (a real Debian base,
    real apt and pip: tests/unit/minimal_matrix.py; its images tested with the base
    suite alone, ``RUNTIME_SUITE``), images ``stagecraft-faults/six:<version>-cpu``
    with aliases ``<version>``. ``change()`` writes a new file under its ``entrypoint/``
    so both runtime stages get new content keys and the next run builds, exports and
    tags. A run takes seconds, so a trial's instants fall in every phase.
  - ``real`` (``REAL``): the slow paths. This checkout's own matrix.yaml and
    matrix.lock, the tag ``stagecraft/paddle:2.6.2-cpu`` (alias ``2.6.2``) as users
    build it (on the suite's engine and registry, not the host's): a
    debootstrapped base, PaddlePaddle's wheels installed hash-checked from the lock
    into a 1 GB runtime stage, every suite of the tag. ``change()`` gives the
    runtime's install step new content, so each run installs, exports and loads that
    1 GB stage again and pushes its layers: faults land inside transfers that take
    seconds, not milliseconds.
- **The state directory** is a tmpfs of ``STATE_BYTES`` (a trial fills it).
- **The registry** is Debian's ``docker-registry`` in the engine's container; the
  engine pushes to it through ``tests/faults/proxy.py`` (run in the engine's network
  namespace by ``nsenter``), whose faults the control file sets.
- **The signing key** is a cosign key pair of the suite's (``signing_key``): every run
  signs its test records and every push signs, attests and attaches what it pushed
  (stagecraft/signing.py), so faults meet those steps too, and a pushed tag must verify.

Everything is made on first use and reused by the next suite run; ``teardown`` removes
the containers and names a run made, never the engine's data.
"""

from __future__ import annotations

import calendar
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import docker
import requests

from stagecraft import statefile, tools
from stagecraft.platforms import host_platform
from tests.integration import engines
from tests.integration.harness import ROOT, six_project, with_default_signals
from tests.integration.registryproc import ACCEPT, Registry

STATE_BYTES = 256 * 1024**2
# The names of what a cold base trial removes: the bootstrapped bases and the base stages.
BASE_NAMES = ("stagecraft-base/", "stagecraft-stage/base:")
# What a run says when the engine failed a check and its suites run again (run_suites).
SUITE_RETRY = "no verdict on the image; the suites run again in a new container"
SIGNING_PASSWORD = "stagecraft-faults"  # the suite's own throwaway key pair's password
# The runtime stage's suite line, left out of the suite's project: its images are tested
# with the base suite alone (10 checks, about 3 s), as a test phase in the faults' way
# needs a real suite, container and record, not the runtime suite's pip installs (14 of
# its 16 s, which would double every --test run). tests/integration builds and tests the
# six images with both suites.
RUNTIME_SUITE = "\n    tests: [tests/image/test_runtime.py]"


@dataclass(frozen=True)
class Project:
    """What a suite run drives (module docstring): ``name`` of its engine's container
    (and of its directory under /var/lib/stagecraft), the engine's data root size
    ``disk_bytes``, BuildKit's cache kept at most ``build_cache_bytes`` by each trial's
    tidy (an engine's own cache GC keeps far more than the disk holds), its images'
    ``repository`` and ``tags`` (tag -> alias); with ``host_platform_only``, its builds
    are of the host's platform alone (``--platform``: the real matrix's tags also
    declare linux/arm64, minutes under emulation, which no fault here is about; ``push``
    pushes what was built). A run past ``run_timeout_s`` is killed by the suite (a
    violation)."""

    key: str
    name: str
    disk_bytes: int
    build_cache_bytes: int
    repository: str
    tags: dict
    host_platform_only: bool = False
    run_timeout_s: float = 900

    @property
    def disk_dir(self) -> Path:
        """Where its engine's disk image, data root mount, signer and tools live."""
        return Path("/var/lib/stagecraft") / self.name

    def write(self, root: Path) -> Path:
        """Make the project under ``root`` (empty); returns its matrix.yaml."""
        if self.key == "six":
            matrix = six_project(root, self.repository)
            text = matrix.read_text()
            assert RUNTIME_SUITE in text, "the six matrix no longer declares the runtime suite as the rig expects"
            matrix.write_text(text.replace(RUNTIME_SUITE, ""))
            return matrix
        caches = shutil.ignore_patterns("__pycache__", "*.pyc")
        for name in ("templates", "entrypoint", "probes"):
            shutil.copytree(ROOT / name, root / name, ignore=caches)
        (root / "tests").symlink_to(ROOT / "tests")
        # As they are: the lock is made for this matrix, its repository included (the
        # images are named as users have them, on the suite's own engine and registry).
        for name in ("matrix.yaml", "matrix.lock"):
            shutil.copy2(ROOT / name, root / name)
        return root / "matrix.yaml"

    def change(self, root: Path) -> str:
        """Give the runtime stage new content (``six``: a new file under entrypoint/, read
        by the step that copies it; ``real``: a comment line in fix-permissions, which the
        install step mounts, so that step runs again); returns the token written."""
        token = secrets.token_hex(8)
        if self.key == "six":
            (root / "entrypoint" / "fault-trial.txt").write_text(token + "\n")
        else:
            script = root / "entrypoint" / "fix-permissions"
            text = re.sub(r"\n# fault trial [0-9a-f]+\n$", "\n", script.read_text())
            script.write_text(f"{text}# fault trial {token}\n")
        return token


# The six project's data root: its images and cache take about 0.5 GB. BuildKit's cache
# kept at 512 MB: a run of 171 trials, the sixth of the day on one data root, filled it
# (no space left to start a build, and every later trial failed its recovery).
SIX = Project("six", "stagecraft-faults", 4 * 1024**3, 512 * 1024**2, "stagecraft-faults/six",
              {"1.16.0-cpu": "1.16.0", "1.17.0-cpu": "1.17.0"})
# 2.6.2-cpu: base and runtime about 1.3 GB unpacked, their blobs 0.4 GB, the layout a run
# writes and loads 0.4 GB more, and a trial's stale runtime until the next tidy; the cache
# keeps the base's apt step (the runtime's install step runs again every trial anyway).
REAL = Project("real", "stagecraft-faults-real", 12 * 1024**3, 3 * 1024**3, "stagecraft/paddle",
               {"2.6.2-cpu": "2.6.2"}, host_platform_only=True, run_timeout_s=2400)
PROJECTS = {p.key: p for p in (SIX, REAL)}


# containerd's client gives an import or a pull (``docker load``, a pull) a lease that
# expires 24 h after it began (``containerd.io/gc.expire``); the operation deletes it as it
# ends. An engine killed during one leaves it, and until it expires it keeps what the
# load had written from containerd's garbage collector: the six project's runtime layer,
# about 50 MB a lease. A day of trials aimed at loads (session 44: 59 such leases, 1 GB,
# and the data root too full for the next calibration's apt) fills the 4 GiB data root.
# ``tidy`` drops them, and all of BuildKit's cache, below ``LOW_FREE_BYTES`` free (seed
# 20261408's last trial met 77 MB free: its recovery's apt had no space); containerd
# collects at the engine's start.
LOW_FREE_BYTES = 1536 * 1024**2
# The engine's containerd, inside its container (what ``ctr`` there is pointed at).
CONTAINERD_SOCK = "/run/docker/containerd/containerd.sock"
STALE_LEASE_S = 600
_LEASE_LINE = re.compile(r"^(\S+)\s+(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.\d+)?Z\s+(.*)$")


def stale_leases(listing: str, now: float, older_than_s: float = STALE_LEASE_S) -> list[str]:
    """The ids of the leases in ``listing`` (``ctr leases ls``: ID, CREATED AT in UTC,
    LABELS) that expire on their own (``containerd.io/gc.expire``, what an interrupted
    import or pull leaves) and began more than ``older_than_s`` seconds before ``now``
    (Unix time): none of the trial about to start, none of BuildKit's (its cache
    records' leases carry ``containerd.io/gc.flat``, and ``prune_builds`` removes them)."""
    out = []
    for line in listing.splitlines():
        m = _LEASE_LINE.match(line.strip())
        if not m or "containerd.io/gc.expire=" not in m.group(3):
            continue
        began = calendar.timegm(time.strptime(m.group(2), "%Y-%m-%dT%H:%M:%S"))
        if now - began > older_than_s:
            out.append(m.group(1))
    return out


def _sh(*argv: str, check: bool = True, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), capture_output=True, text=True, check=check, timeout=timeout)


def data_disk(project: Project) -> Path:
    """The engine's data root: ``disk_dir/data``, an ext4 file system on a loop device
    of ``disk_dir/disk.img``, made and mounted when it is not. Raises CalledProcessError."""
    mnt = project.disk_dir / "data"
    if _sh("mountpoint", "-q", str(mnt), check=False).returncode == 0:
        return mnt
    mnt.mkdir(parents=True, exist_ok=True)
    img = project.disk_dir / "disk.img"
    if not img.exists():
        with open(img, "wb") as f:
            os.posix_fallocate(f.fileno(), 0, project.disk_bytes)
        _sh("mkfs.ext4", "-q", "-F", "-m", "0", "-E", "nodiscard", str(img))
    _sh("mount", "-o", "loop", str(img), str(mnt))
    return mnt


def start_engine(project: Project) -> engines.TestEngine:
    """The suite's engine, started when it is not (its data volume bound to
    ``data_disk()``). Raises RuntimeError when it cannot start."""
    name = project.name
    was_mounted = _sh("mountpoint", "-q", str(project.disk_dir / "data"), check=False).returncode == 0
    mnt = data_disk(project)
    host = docker.from_env()
    if not was_mounted:  # an engine that started before the mount (a reboot) binds the bare directory
        try:
            host.containers.get(name).stop(timeout=10)
        except docker.errors.NotFound:
            pass
    vol = f"{name}-data"
    try:
        opts = host.volumes.get(vol).attrs.get("Options") or {}
        if opts.get("device") != str(mnt):
            raise RuntimeError(f"volume {vol} exists and is not bound to {mnt}; remove it "
                               f"(STAGECRAFT_MODERN_NAME={name} scripts/modern-engine.sh down)")
    except docker.errors.NotFound:
        host.volumes.create(vol, driver="local", labels={"io.stagecraft.engine": name},
                            driver_opts={"type": "none", "o": "bind", "device": str(mnt)})
    return engines.modern(name)


def signing_key(project: Project) -> tuple[dict[str, str], Path]:
    """The suite's cosign key pair (``disk_dir/signer/cosign.key`` and ``.pub``, made on
    first use) and the cosign and oras it uses (``stagecraft.tools.ensure`` under
    ``disk_dir``: fetched once per machine). Raises BuildError when they cannot be fetched."""
    kit = tools.ensure(project.disk_dir)
    signer = project.disk_dir / "signer"
    if not (signer / "cosign.pub").is_file():
        shutil.rmtree(signer, ignore_errors=True)
        signer.mkdir(parents=True)
        subprocess.run([kit["cosign"], "generate-key-pair"], cwd=signer, check=True, capture_output=True,
                       env={**os.environ, "COSIGN_PASSWORD": SIGNING_PASSWORD}, timeout=120)
    return kit, signer / "cosign.key"


def kill_engine(name: str, init_pid: int = 0) -> None:
    """SIGKILL the engine's container ``name``: dockerd, its containers' shims and the registry
    die at once, as on a crash or an OOM kill of the engine. With ``init_pid`` (the
    container's first process, ``engine_pid``), the signal goes to it straight from
    here: the namespace's init dying takes every process of it at once, with no API
    round trip in between (a kill aimed at a window of a few milliseconds)."""
    if init_pid:
        try:
            os.kill(init_pid, signal.SIGKILL)
            return
        except ProcessLookupError:
            pass
    _sh("docker", "kill", "--signal", "KILL", name, check=False)


def engine_pid(name: str) -> int:
    """The host pid of the first process of the engine's container ``name`` (0 when it
    is not running)."""
    out = _sh("docker", "inspect", "--format", "{{.State.Pid}}", name, check=False).stdout
    return int(out.strip() or 0)


@dataclass
class Run:
    """One ``build.py`` process of a trial: its argv, exit code, output and seconds."""

    argv: list[str]
    rc: int | None = None
    out: str = ""
    err: str = ""
    seconds: float = 0.0
    signalled: str = ""  # the fault the run met: KILL, INT, engine, registry, disk, overlap
    timed_out: bool = False  # killed by the suite past its timeout (a violation, whatever it met)
    # Each stderr line as it came: (seconds after the start, the line without its newline).
    lines: list = field(default_factory=list, repr=False)

    def last_line(self) -> str:
        """The last non-empty line on stderr (what the user read last)."""
        lines = [ln for ln in self.err.splitlines() if ln.strip()]
        return lines[-1].strip() if lines else ""

    def said_before(self, seconds: float) -> str:
        """The last non-empty stderr line that came before ``seconds`` s after the start
        (what the run was doing when a fault struck then), or "" when none had."""
        said = [ln.strip() for t, ln in self.lines if t <= seconds and ln.strip()]
        return said[-1] if said else ""


@dataclass
class Rig:
    """The suite's engine, project, state directory, registry and proxy (module
    docstring). ``work`` holds the project, the scratch directory runs use as $TMPDIR,
    the state file system's mount point and the proxy's control file; ``project`` is
    what it drives (``SIX`` or ``REAL``)."""

    work: Path
    project: Project = SIX
    engine: engines.TestEngine = field(init=False)
    registry: Registry = field(init=False)
    proxy: subprocess.Popen | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self.work.mkdir(parents=True, exist_ok=True)
        self.project_dir = self.work / "project"
        self.scratch = self.work / "scratch"
        self.state = self.work / "state"
        self.control = self.work / "proxy.json"
        self.filler = self.state / ".fault-filler"
        self._readers: dict[int, tuple[list[threading.Thread], list[str]]] = {}  # pid -> readers, stdout
        # Runs whose suites the engine failed to start a process for, run again by the
        # product in a new container (stagecraft.testing.run_suites): counted, as the
        # retry is what hides that engine fault from the trial's verdict.
        self.suite_retries = 0

    # -- set-up ------------------------------------------------------------------
    def up(self) -> None:
        """Start the engine, make the project (anew: its templates, entrypoint and
        probes are this checkout's, its suites linked to this checkout's tests), mount the
        state file system, start the registry and its proxy."""
        self.engine = start_engine(self.project)
        self.client = self.engine.client()
        self.signing = signing_key(self.project)
        if (self.project_dir / "matrix.yaml").is_file():  # an earlier suite run's: maybe older code
            shutil.rmtree(self.project_dir)
        self.project_dir.mkdir(parents=True, exist_ok=True)
        self.project.write(self.project_dir)
        self.scratch.mkdir(exist_ok=True)
        self.state.mkdir(exist_ok=True)
        if _sh("mountpoint", "-q", str(self.state), check=False).returncode != 0:
            _sh("mount", "-t", "tmpfs", "-o", f"size={STATE_BYTES},mode=0755", "tmpfs", str(self.state))
        root = Path(tempfile.mkdtemp(prefix="faults-registry-", dir=self.engine.share))
        self.registry = Registry(root, None, self.engine)
        self.whole: set[tuple[str, str]] = set()  # manifests found whole (missing_blobs)
        self.registry.start()
        self.set_proxy("pass")
        self.start_proxy()

    def start_proxy(self) -> None:
        """The proxy in the engine's network namespace, on the engine's address."""
        pid = self.client_host().containers.get(self.project.name).attrs["State"]["Pid"]
        self.proxy_port = self.registry.port + 1
        self.proxy = subprocess.Popen(
            ["nsenter", f"--net=/proc/{pid}/ns/net", sys.executable, "-m", "tests.faults.proxy",
             f"0.0.0.0:{self.proxy_port}", f"127.0.0.1:{self.registry.port}", str(self.control)],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        assert self.proxy.stdout is not None and self.proxy.stdout.readline().strip() == "ready"

    @property
    def push_to(self) -> str:
        """The registry as build.py pushes to it: through the proxy."""
        return f"{self.engine.address}:{self.proxy_port}"

    def set_proxy(self, mode: str, **kw) -> None:
        """Set the proxy's fault (``tests/faults/proxy.py``); a new nonce restarts its count."""
        statefile.write_json(self.control, {"mode": mode, "nonce": secrets.token_hex(4), **kw})

    def restart_engine(self) -> None:
        """Start the engine again after ``kill_engine``, then its registry and proxy
        (they lived in its network namespace)."""
        if self.proxy is not None:
            self.proxy.kill()
            self.proxy.wait()
        self.engine = engines.modern(self.project.name)
        self.client = self.engine.client()
        self.registry.pid = ""
        self.registry.start()
        self.start_proxy()

    def engine_down(self) -> bool:
        """Whether the engine does not answer (killed, not yet started again)."""
        try:
            self.client.ping()
            return False
        except (docker.errors.DockerException, requests.RequestException):
            return True

    def down(self) -> None:
        """Stop the proxy and the registry, remove the names ``push`` gave images for
        this run's registry (``ADDRESS:PORT/...``: the next suite run's registry has
        another port, and these names would keep old stages from ``prune``), unmount the
        state file system (its content goes); the engine and its data stay."""
        try:
            names = [t for img in self.client.images.list() for t in img.tags if t.startswith(f"{self.push_to}/")]
        except (docker.errors.DockerException, requests.RequestException, AttributeError):
            names = []  # an engine gone (AttributeError: never started): left to a later run
        for name in names:
            try:
                self.client.images.remove(name, noprune=True)
            except (docker.errors.DockerException, requests.RequestException):
                pass  # one name the engine keeps (in use): the others still go
        if self.proxy is not None:
            self.proxy.kill()
            self.proxy.wait()
        try:
            self.registry.stop()
        except docker.errors.DockerException:
            pass
        shutil.rmtree(self.registry.root, ignore_errors=True)
        _sh("umount", str(self.state), check=False)

    @staticmethod
    def client_host() -> docker.DockerClient:
        return docker.from_env()

    # -- the project -------------------------------------------------------------
    def change(self) -> str:
        """New content for the runtime stages (``Project.change``); returns it."""
        return self.project.change(self.project_dir)

    def data_disk(self) -> Path:
        """The engine's data root (``data_disk``)."""
        return data_disk(self.project)

    def engine_pid(self) -> int:
        """The host pid of the engine container's first process (``engine_pid``)."""
        return engine_pid(self.project.name)

    def kill_engine(self, init_pid: int = 0) -> None:
        """SIGKILL the engine's container (``kill_engine``)."""
        kill_engine(self.project.name, init_pid)

    def argv(self, *args: str) -> list[str]:
        """``build.py ARGS`` on this project and state directory (``build`` and ``test``
        of the host's platform alone where the project says so)."""
        only = (["--platform", host_platform()] if self.project.host_platform_only and args[:1]
                in (("build",), ("test",)) else [])
        return [sys.executable, str(ROOT / "build.py"), *args[:1], "--matrix",
                str(self.project_dir / "matrix.yaml"), "--state-dir", str(self.state), *only, *args[1:]]

    def environ(self) -> dict[str, str]:
        """A run's environment: this engine, the scratch directory, the signing key (every
        test record signed, every push signed; the registry is plain HTTP)."""
        kit, key = self.signing
        return self.engine.environ({
            "TMPDIR": str(self.scratch), "PYTHONUNBUFFERED": "1", "STAGECRAFT_COSIGN_KEY": str(key),
            "COSIGN_PASSWORD": SIGNING_PASSWORD, "STAGECRAFT_INSECURE_REGISTRY": "1",
            "STAGECRAFT_COSIGN": kit["cosign"], "STAGECRAFT_ORAS": kit["oras"]})

    def verify(self, tag: str) -> Run:
        """``build.py verify`` of ``tag`` as pushed (signature, SBOM, test record)."""
        key = self.signing[1].with_suffix(".pub")
        return self.run("verify", f"{self.push_to}/{self.project.repository}:{tag}", "--key", str(key))

    def wait_tag_phase(self, proc: subprocess.Popen, timeout: float) -> float | None:
        """Wait until a run's tag phase has begun (its record ``tags/pending-*.json`` is
        in the state directory: written before the first name moves, ``tagrecovery``);
        returns the seconds waited, or None when ``proc`` ended or ``timeout`` s passed
        first."""
        t0 = time.monotonic()
        tags = self.state / "tags"
        while time.monotonic() - t0 < timeout and proc.poll() is None:
            if any(tags.glob("pending-*.json")):
                return time.monotonic() - t0
            time.sleep(0.002)
        return None

    def content_evidence(self, digest: str) -> str:
        """What the engine's containerd holds of the blob ``digest`` (for a load refused
        with "content digest D: not found"): whether its metadata lists it in Docker's
        namespace, whether the content store's file is there, and how many ingests and
        leases it holds; read with ``ctr`` inside the engine's container (at most 30 s)."""
        hexd = digest.removeprefix("sha256:")
        blobs = "/var/lib/docker/containerd/daemon/io.containerd.content.v1.content/blobs/sha256"
        script = (f"export CONTAINERD_ADDRESS={CONTAINERD_SOCK}; "
                  f"echo listed: $(ctr -n moby content ls -q | grep -c {hexd}); "
                  f"ls -l {blobs}/{hexd} 2>&1 | tail -1; "
                  f"echo ingests: $(ctr -n moby content active | tail -n +2 | grep -c .); "
                  f"ctr -n moby content active | grep -i {hexd}; "
                  f"echo leases: $(ctr -n moby leases ls -q | grep -c .)")
        try:
            done = _sh("docker", "exec", self.project.name, "sh", "-c", script, check=False, timeout=30)
        except subprocess.TimeoutExpired:
            return "ctr did not answer within 30 s"
        return (done.stdout + done.stderr).strip()[-2000:]

    def log_sizes(self) -> dict[Path, int]:
        """The bytes of each stage log of the state directory (``logs/*.log``) now."""
        sizes = {}
        for path in (self.state / "logs").glob("*.log"):
            try:
                sizes[path] = path.stat().st_size
            except FileNotFoundError:
                pass
        return sizes

    def wait_load(self, proc: subprocess.Popen, before: dict[Path, int], timeout: float,
                  nth: int = 1) -> float | None:
        """Wait until a run began its ``nth`` load of a built stage's OCI layout into the
        engine (the stage logs got ``nth`` of ``layoutload``'s ``$ tar -C LAYOUT -cf - . |
        docker load`` lines past their sizes in ``before``, ``log_sizes`` taken before the
        run wrote anything; the six project's runs load the runtime stage, then the label
        stage); returns the seconds waited, or None when ``proc`` ended or ``timeout`` s
        passed first."""
        t0 = time.monotonic()
        line = re.compile(rb"^\$ tar -C \S+ -cf - \. \| \S+ load$", re.M)
        while time.monotonic() - t0 < timeout and proc.poll() is None:
            seen = 0
            for path, size in self.log_sizes().items():
                if size <= before.get(path, 0):
                    continue
                with open(path, "rb") as f:
                    f.seek(before.get(path, 0))
                    seen += len(line.findall(f.read(1 << 20)))
            if seen >= nth:
                return time.monotonic() - t0
            time.sleep(0.005)
        return None

    def proxy_log_size(self) -> int:
        """Bytes of the proxy's log of faults met (``CONTROL.log``) so far."""
        try:
            return Path(f"{self.control}.log").stat().st_size
        except FileNotFoundError:
            return 0

    def wait_proxy_log(self, proc: subprocess.Popen, since: int, timeout: float) -> float | None:
        """Wait until the proxy logged a request past byte ``since`` of its log (in
        ``hold`` mode: the first matching request, held); returns the seconds
        waited, or None when ``proc`` ended or ``timeout`` s passed first."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout and proc.poll() is None:
            if self.proxy_log_size() > since:
                return time.monotonic() - t0
            time.sleep(0.002)
        return None

    def start(self, argv: list[str]) -> tuple[subprocess.Popen, Run, float]:
        """Start ``argv`` in a session of its own with default signal dispositions; its
        output is read as it comes (stderr line by line into ``Run.lines``, timed)."""
        # errors="replace": a child that inherits stderr (tar, docker) may write bytes that
        # are not UTF-8, or a SIGKILL may cut a character; a reader that died on them would
        # leave the pipe undrained and the run blocked (a false timeout).
        proc = subprocess.Popen(with_default_signals(argv), cwd=self.project_dir, env=self.environ(),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                errors="replace", start_new_session=True)
        run, t0 = Run(argv), time.monotonic()
        out: list[str] = []

        def read_err() -> None:
            try:
                for line in proc.stderr:
                    run.lines.append((time.monotonic() - t0, line.rstrip("\n")))
            except (OSError, ValueError) as exc:  # recorded, and the pipe still drained
                run.lines.append((time.monotonic() - t0, f"(the suite's reader failed: {exc!r})"))
                proc.stderr.buffer.read()

        readers = [threading.Thread(target=read_err, daemon=True),
                   threading.Thread(target=lambda: out.append(proc.stdout.read()), daemon=True)]
        for r in readers:
            r.start()
        self._readers[proc.pid] = (readers, out)
        return proc, run, t0

    def finish(self, proc: subprocess.Popen, run: Run, t0: float, timeout: float | None = None) -> Run:
        """Wait for ``proc`` and the end of its output (orphans of a SIGKILLed build.py
        may hold its pipes: they are waited for too), killing its process group once
        ``timeout`` s (default the project's ``run_timeout_s``) have passed since the
        run's start (``t0``; the time a trial spent injecting its fault counts: a run may
        take ``timeout`` s in all); fill ``run``."""
        timeout = timeout or self.project.run_timeout_s
        readers, out = self._readers.pop(proc.pid)
        deadline = t0 + timeout
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
        for r in readers:
            r.join(timeout=max(0.0, deadline - time.monotonic()))
        if proc.poll() is None or any(r.is_alive() for r in readers):
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:  # the group is empty: a pipe holder of another session
                pass
            proc.wait()
            run.timed_out = True
            for r in readers:
                r.join(timeout=30)
        run.out, run.err = "".join(out), "".join(ln + "\n" for _, ln in run.lines)
        run.rc, run.seconds = proc.returncode, time.monotonic() - t0
        self.suite_retries += run.err.count(SUITE_RETRY)
        return run

    def run(self, *args: str, timeout: float | None = None) -> Run:
        """``build.py ARGS`` to its end."""
        return self.finish(*self.start(self.argv(*args)), timeout=timeout)

    def run_marked(self, *args: str, mark: str, timeout: float | None = None) -> tuple[Run, float | None]:
        """``build.py ARGS`` to its end; also the seconds after the start at which a
        stderr line beginning with ``mark`` (leading spaces aside) first came, or None
        when none did. Past ``timeout`` s its group is killed."""
        run = self.run(*args, timeout=timeout)
        return run, next((t for t, ln in run.lines if ln.lstrip().startswith(mark)), None)

    # -- what the engine, the state directory and the registry hold ----------------
    def names(self) -> dict[str, str | None]:
        """Every name of the project (each tag and alias) -> its image id, or None."""
        out: dict[str, str | None] = {}
        for tag, alias in self.project.tags.items():
            for name in (tag, alias):
                ref = f"{self.project.repository}:{name}"
                try:
                    out[ref] = self.client.images.get(ref).id
                except docker.errors.ImageNotFound:
                    out[ref] = None
        return out

    def image_complete(self, image_id: str) -> bool:
        """The engine holds the image whole: its config and every layer of its rootfs
        (``docker image inspect`` answers and names layers)."""
        try:
            attrs = self.client.api.inspect_image(image_id)
        except docker.errors.DockerException:
            return False
        return bool((attrs.get("RootFS") or {}).get("Layers"))

    def containers(self) -> list[str]:
        """Every container of the suite's engine, running or not (the registry is a
        process of the engine's own container, not one of these): the suites' and the
        short ones a run makes (its SBOM inventory), labelled or not."""
        return [f"{c.name} ({c.status}, {c.attrs.get('Config', {}).get('Image', '')[:40]})"
                for c in self.client.containers.list(all=True)]

    def scratch_dirs(self) -> list[str]:
        """The runs' scratch directories (``<TMPDIR>/stagecraft-<uid>/run-*``, scratch.py)."""
        return sorted(str(p.relative_to(self.scratch)) for p in self.scratch.glob("stagecraft-*/run-*"))

    def tidy(self) -> str:
        """Remove what earlier trials left that nothing uses, before a trial looks: suite
        containers (a trial that left one recorded it), the stage images no target of the
        plan uses (``build.py prune --yes``), images without a name, and BuildKit's cache
        past the project's ``build_cache_bytes``. The engine's image
        list then stays short (the containerd image store took 10 to 15 s to list 548
        images, twice a trial, and more each trial). Returns "" or what failed, which the
        trial records."""
        # Every container that is not running. A trial that left one has recorded it
        # (the check counts every container of the engine); removing it here keeps one
        # defect from failing the tidy of every later trial (prune cannot remove the
        # image it holds).
        for c in self.client.containers.list(all=True):
            if c.status != "running":
                c.remove(force=True)
        argv = [sys.executable, str(ROOT / "build.py"), "prune", "--matrix", str(self.project_dir / "matrix.yaml"),
                "--yes"]
        done = self.finish(*self.start(argv), timeout=600)
        if done.rc != 0:
            return f"build.py prune exited {done.rc}: {done.last_line()[:200]}"
        self.client.images.prune(filters={"dangling": True})
        self.client.api.prune_builds(keep_storage=self.project.build_cache_bytes)
        if shutil.disk_usage(self.data_disk()).free < LOW_FREE_BYTES:
            # BuildKit's cache holds its records' compressed blobs beside the 512 MB that
            # keep_storage counts (1.3 GB in all at the end of seed 20261408): all of it goes.
            self.client.api.prune_builds(all=True)
            return self.drop_stale_leases()
        return ""

    def drop_stale_leases(self) -> str:
        """Delete the leases an interrupted import or pull left (``stale_leases``) and
        restart the engine, whose containerd then collects what they held; said on
        stderr. Returns "" or what failed (``tidy``'s answer)."""
        ctr = ("docker", "exec", "-e", f"CONTAINERD_ADDRESS={CONTAINERD_SOCK}", self.project.name,
               "ctr", "-n", "moby", "leases")
        listed = _sh(*ctr, "ls", check=False, timeout=60)
        ids = stale_leases(listed.stdout, time.time())
        if listed.returncode != 0 or not ids:
            return "" if listed.returncode == 0 else f"ctr leases ls exited {listed.returncode}"
        done = _sh(*ctr, "rm", *ids, check=False, timeout=120)  # argv: no shell reads an id
        if done.returncode != 0:
            return f"ctr leases rm exited {done.returncode}: {done.stderr.strip()[-200:]}"
        _sh("docker", "restart", "--time", "20", self.project.name, timeout=120)
        self.restart_engine()
        free = shutil.disk_usage(self.data_disk()).free
        print(f"faults: the engine's data root was under {LOW_FREE_BYTES >> 20} MiB free: dropped "
              f"{len(ids)} lease(s) of interrupted loads and restarted it ({free >> 20} MiB free now)",
              file=sys.stderr, flush=True)
        return ""

    def images(self) -> set[str]:
        """Every image id the engine holds (named or not)."""
        return {i.id for i in self.client.images.list(all=True)}

    def base_images(self) -> dict[str, str]:
        """Each name of a bootstrapped base (``stagecraft-base/...``, bases.py) or of a
        base stage (``stagecraft-stage/base:...``, plan.py) -> its image id."""
        return {t: i.id for i in self.client.images.list() for t in i.tags if t.startswith(BASE_NAMES)}

    def drop_base(self) -> int:
        """Remove every name ``base_images`` lists, so that the next run bootstraps its
        base (debootstrap, the import) and builds the base stage again (its steps may
        come from BuildKit's cache): a cold base. Returns how many names went. Raises
        docker.errors.DockerException."""
        names = sorted(self.base_images())
        for name in names:
            self.client.images.remove(name, force=True)
        return len(names)

    def state_temps(self) -> list[str]:
        """Temporary files of an atomic write left in the state directory
        (``.NAME.*.tmp``: statefile.write_atomic, outfile), relative to it."""
        return sorted(str(p.relative_to(self.state)) for p in self.state.rglob(".*.tmp") if p != self.filler)

    def state_files(self) -> list[Path]:
        return [p for p in self.state.rglob("*") if p.is_file() and p != self.filler]

    def registry_tags(self) -> dict[str, str]:
        """``repo:tag`` -> manifest digest, for every tag the registry lists."""
        base = f"http://{self.registry.host}/v2"
        out = {}
        for repo in requests.get(f"{base}/_catalog", timeout=10).json().get("repositories") or []:
            for tag in requests.get(f"{base}/{repo}/tags/list", timeout=10).json().get("tags") or []:
                r = requests.head(f"{base}/{repo}/manifests/{tag}", headers={"Accept": ACCEPT}, timeout=10)
                out[f"{repo}:{tag}"] = r.headers.get("Docker-Content-Digest", f"HTTP {r.status_code}")
        return out

    def missing_blobs(self) -> list[str]:
        """``repo:tag -> digest`` for each blob or child manifest a tag's manifest
        references that the registry does not serve.

        A manifest found whole is remembered by ``(repo, digest)`` and not walked again:
        its content cannot change (content-addressed) and nothing removes a blob from
        this registry (deletion is off, stagecraft sends no DELETE, it is never
        garbage-collected), so it stays whole. Each tag's current digest is still asked
        every time (a tag moves). Without this the check walked every tag of the run:
        about five more per push trial, each a manifest and its blobs."""
        base = f"http://{self.registry.host}/v2"
        missing: list[str] = []

        def walk(repo: str, ref: str, label: str) -> bool:
            if (repo, ref) in self.whole:
                return True
            r = requests.get(f"{base}/{repo}/manifests/{ref}", headers={"Accept": ACCEPT}, timeout=10)
            if r.status_code != 200:
                missing.append(f"{label} -> manifest {ref} (HTTP {r.status_code})")
                return False
            try:
                doc = r.json()
            except ValueError:
                missing.append(f"{label} -> manifest {ref} is not JSON ({len(r.content)} bytes)")
                return False
            whole = all([walk(repo, child["digest"], label) for child in doc.get("manifests") or []])
            for blob in [doc.get("config"), *(doc.get("layers") or [])]:
                if blob and blob.get("digest"):
                    h = requests.head(f"{base}/{repo}/blobs/{blob['digest']}", timeout=10)
                    if h.status_code != 200:
                        missing.append(f"{label} -> blob {blob['digest'][:19]} (HTTP {h.status_code})")
                        whole = False
            if whole and ref.startswith("sha256:"):
                self.whole.add((repo, ref))
            return whole

        for ref, digest in self.registry_tags().items():
            repo, tag = ref.rsplit(":", 1)
            walk(repo, digest if digest.startswith("sha256:") else tag, ref)
        return missing

    def fill(self, where: Path, leave: int) -> Path:
        """Fill the file system of ``where`` so that ``leave`` bytes stay free; returns
        the filler file (remove it to give the space back)."""
        filler = where / ".fault-filler"
        filler.unlink(missing_ok=True)
        st = os.statvfs(where)
        size = max(st.f_bavail * st.f_frsize - leave, 0)
        with open(filler, "wb") as f:
            try:
                os.posix_fallocate(f.fileno(), 0, size) if size else None
            except OSError:
                pass
        return filler

    def record(self, image_id: str) -> dict | None:
        """The test record of ``image_id`` in the state directory (None: none)."""
        from stagecraft.testing import load_record

        return load_record(self.state, image_id)


def load_json_lines(path: Path, strict: bool = False) -> list[dict]:
    """The JSON objects of ``path``, one per non-empty line ([] when it does not exist).
    With ``strict``, a missing file raises OSError and a line that is not a JSON object
    ValueError naming the file and line."""
    if not path.exists() and not strict:
        return []
    out = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if line.strip():
            try:
                doc = json.loads(line)
            except ValueError as exc:
                raise ValueError(f"{path}:{number}: not JSON ({exc})") from None
            if not isinstance(doc, dict) or not {"kind", "violations", "seconds"} <= doc.keys():
                raise ValueError(f"{path}:{number}: not a trial's line (no kind, violations, seconds)")
            out.append(doc)
    return out
