"""The Docker engine: the SDK for images (inspect, tag, import, remove; moving one to or
from a registry or an archive is ``imagetransfer``), and BuildKit builds through the
docker client that ``buildpath`` found (its command line: ``buildpath.build_argv``; its
output read by ``buildlog``; an OCI layout export loaded by ``layoutload``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

import docker
import docker.errors

from . import platforms, stalesnapshot, steptimes
from .buildlog import LOST_RE, BuildLog, failure_reason, name_taken, session_lost, step_started
from .buildpath import Builder, build_argv, buildx_facts, detect_builder
from .capabilities import EngineFacts
from .errors import BuildError, InputError, NameTaken
from .layoutload import load_layout
from .safetext import cut_middle
from .safetext import error_text as _short


class Engine:
    """A connection to the Docker daemon (``docker.from_env()``) plus a BuildKit path.

    Raises ``InputError`` at construction when no daemon answers."""

    def __init__(self, builder: Builder | None = None):
        host = os.environ.get("DOCKER_HOST")
        where = f"DOCKER_HOST={host[:200]}" if host else "docker"
        try:
            self.client = docker.from_env(timeout=600)
            self.client.ping()
        except (docker.errors.DockerException, OSError, ValueError) as exc:
            if isinstance(exc, ValueError) or "bind address" in str(exc):  # cannot be parsed
                raise InputError.one(where, f"not a Docker engine address ({_short(exc)})",
                                     "unset it, or give unix:///var/run/docker.sock or "
                                     "tcp://HOST:PORT") from None
            raise InputError.one(where, f"no Docker engine answers ({_short(exc)})",
                                 "run `make setup` (starts one as root) or start the daemon") from None
        self._builder = builder
        self._facts: EngineFacts | None = None
        self._containerd: bool | None = None
        self._rewrites: bool | None = None
        self._stopped = False  # stop_builds was called: start no second export
        self._running: set[subprocess.Popen] = set()
        self._lock = threading.Lock()

    def stop_builds(self) -> None:
        """Terminate every build in flight (SIGTERM to the docker client, which cancels
        its BuildKit solve). For Ctrl-C: nothing half-built gets a name."""
        with self._lock:
            self._stopped = True
            running = list(self._running)
        for proc in running:
            proc.terminate()

    @property
    def builder(self) -> Builder:
        """The BuildKit path, detected on first use."""
        if self._builder is None:
            self._builder = detect_builder()
        return self._builder

    def image_id(self, ref: str) -> str | None:
        """The id (``sha256:...``) of local image ``ref``, or None."""
        try:
            return self.client.images.get(ref).id
        except docker.errors.ImageNotFound:
            return None
        except docker.errors.APIError as exc:
            if getattr(exc, "status_code", None) == 404:
                return None
            raise

    def inspect(self, ref: str) -> dict:
        """``docker image inspect`` of ``ref`` (the engine's JSON). Raises BuildError."""
        try:
            return self.client.api.inspect_image(ref)
        except docker.errors.DockerException as exc:
            raise BuildError(f"cannot inspect {ref}: {_short(exc)}") from None

    def _layers(self, ref: str) -> list[str]:
        """The diff ids of local image ``ref`` (``RootFS.Layers``); [] when it is not here."""
        try:
            return list(self.client.api.inspect_image(ref)["RootFS"]["Layers"])
        except (docker.errors.DockerException, KeyError, TypeError):
            return []

    def tag(self, image_id: str, ref: str) -> None:
        """Point ``ref`` (``repo:tag``) at ``image_id``. Raises BuildError."""
        repo, tag = ref.rsplit(":", 1)
        if not self.client.api.tag(image_id, repo, tag, force=True):
            raise BuildError(f"could not tag {image_id[:19]} as {ref}")

    def untag(self, ref: str) -> None:
        """Remove the name ``ref`` (``docker rmi --no-prune``: the image stays while
        another name, such as its stage key, holds it). A name already gone is fine."""
        try:
            self.client.api.remove_image(ref, noprune=True)
        except docker.errors.NotFound:
            pass
        except docker.errors.DockerException as exc:
            raise BuildError(f"cannot remove the name {ref}: {_short(exc)}") from None

    def identity(self) -> str:
        """The engine's own ID (``docker info``'s ``ID``; its socket address where the
        engine gives none): what the state directory's tag record is kept per. Raises
        BuildError when ``docker info`` fails: a stand-in key there would let two runs
        on one engine take different locks."""
        try:
            return str(self.client.info().get("ID") or "") or self.client.api.base_url
        except docker.errors.DockerException as exc:
            raise BuildError(f"the Docker engine did not say its ID (docker info: {_short(exc)}); "
                             "no tag was moved: run again once `docker info` answers") from None

    def import_tarball(self, tarball: Path, repository: str, tag: str,
                       changes: Iterable[str] = (), platform: str = "",
                       source_date_epoch: int = 0) -> str:
        """``docker import`` a root filesystem tarball as ``repository:tag``.

        ``platform`` (``linux/arm64``): the image is made for that platform instead of the
        host's, by a BuildKit build of ``FROM scratch`` + ``ADD`` with ``--platform`` (the
        import API of Docker 20.10 ignores a platform). With ``source_date_epoch`` where
        ``rewrites_timestamps`` holds, the same BuildKit build makes it, with that epoch:
        the import API stamps the image with the time of the import, so two imports of
        one tarball would differ. The tarball must sit alone in its directory (the build
        context). Raises ``BuildError``."""
        epoch = source_date_epoch if self.rewrites_timestamps else 0
        if platform or epoch:
            ctx = tarball.parent
            dockerfile = ctx.parent / f"{tarball.name}.Dockerfile"
            dockerfile.write_text(f"FROM scratch\nADD {tarball.name} /\n" + "".join(
                f"{c}\n" for c in changes))
            self.build(dockerfile, ctx, ctx.parent / f"{tarball.name}.log",
                       ctx.parent / f"{tarball.name}.iid", {},
                       extra_args=["--platform", platform or platforms.host_platform(),
                                   "-t", f"{repository}:{tag}"],
                       source_date_epoch=epoch)
            found = self.image_id(f"{repository}:{tag}")
            if not found:
                raise BuildError(f"import of {repository}:{tag} ({platform}) left no image")
            return found
        stalesnapshot.once_more(lambda: self.client.api.import_image_from_file(
            str(tarball), repository=repository, tag=tag, changes=list(changes)))
        found = self.image_id(f"{repository}:{tag}")
        if not found:
            raise BuildError(f"import of {repository}:{tag} left no image")
        return found

    def build(self, dockerfile: Path, context: Path, log_path: Path, iidfile: Path,
              secrets: dict[str, Path], on_step: Callable[[str], None] | None = None,
              build_args: dict[str, str] | None = None, extra_args: Iterable[str] = (),
              progress: BuildLog | None = None, source_date_epoch: int = 0,
              provenance_dir: Path | None = None) -> str:
        """Build one Dockerfile with BuildKit; returns the image id. The plain-progress output goes
        to ``log_path`` and, line by line, to ``progress`` (what ran, came from a cache, which
        caches failed); each step's first line to ``on_step``. Secrets: ``id -> file`` (secret
        mounts: never in a layer). ``source_date_epoch`` (s; 0: none) is the ``SOURCE_DATE_EPOCH``
        build argument (a stage's ``ARG SOURCE_DATE_EPOCH`` gives it to its RUN steps: hash-based
        .pyc). Where ``rewrites_timestamps`` holds (BuildKit 0.13, buildx, the containerd image
        store), a build with an epoch gets file times in its new layers, its config and history at
        or before it (docs/build-repro.md), one with a ``provenance_dir`` BuildKit's SLSA
        provenance, kept as ``<provenance_dir>/<manifest hex>.intoto.json``; it is exported as an
        OCI layout and loaded (``load_layout``: the engine gets the image manifest, not an index
        with the attestation, so its id does not depend on the build's time). The steps fix layer
        times (``steptimes``): ``rewrite-timestamp`` is used where the layout shows an entry newer
        than the epoch (built again from the cache just made, ``steptimes.again_args``; not after
        ``stop_builds``), or at once for a Dockerfile with COPY or ADD. A build that lost a shared
        step's session (``session_lost``), or met a directory at a new snapshot's id (what an
        engine's crash leaves: ``stalesnapshot``), is run once more. Raises ``BuildError`` naming the log."""
        layout = None
        rewrite = False
        if (source_date_epoch or provenance_dir) and self.rewrites_timestamps:
            layout = iidfile.with_name(iidfile.name + ".oci")
            text = dockerfile.read_text(encoding="utf-8")
            rewrite = bool(source_date_epoch) and steptimes.makes_dated_layers(text)
        metadata = iidfile.with_name(iidfile.name + ".metadata.json")

        def run(rewrite: bool, again: bool = False) -> None:
            argv = build_argv(self.builder, dockerfile, context, iidfile, secrets=secrets,
                              build_args=build_args or {},
                              extra_args=steptimes.again_args(extra_args) if again else extra_args,
                              source_date_epoch=source_date_epoch, layout=layout,
                              rewrite_timestamps=rewrite, provenance=provenance_dir is not None,
                              metadata=metadata)
            shown, steps = (None, None) if again else (progress, on_step)
            rc, tail = self._run_logged(argv, log_path, shown, steps, append=again)
            if rc != 0 and not self._stopped:  # once
                why = ("lost a shared step's session: building again" if session_lost(tail) and not again
                       else stalesnapshot.WHY if stalesnapshot.build_met(tail) else "")
                if why:
                    rc, tail = self._run_logged(argv, log_path, shown, steps, append=True, why=why)
            if rc != 0 or not iidfile.exists():
                self._raise_failed(rc, tail, log_path)

        run(rewrite)
        if layout is None:
            return self._built_id(iidfile.read_text().strip(), metadata)
        try:
            if source_date_epoch and not rewrite and steptimes.check_export(
                    layout, text, source_date_epoch, self._layers, log_path):
                shutil.rmtree(layout, ignore_errors=True)
                iidfile.unlink(missing_ok=True)
                if self._stopped:  # Ctrl-C came while the layout was checked
                    raise BuildError(f"stopped before the export with rewrite-timestamp; log: {log_path}")
                run(True, again=True)
            return load_layout(self.builder, layout, log_path, provenance_dir, self.image_id,
                               self.answers, stopped=lambda: self._stopped)
        finally:
            shutil.rmtree(layout, ignore_errors=True)

    def _run_logged(self, argv: list[str], log_path: Path, progress: BuildLog | None,
                    on_step: Callable[[str], None] | None, append: bool = False,
                    why: str = "") -> tuple[int, list[str]]:
        """Run the build ``argv``: its output to ``log_path`` (mode 0600, build arguments may be
        secret; appended with ``append``, ``why`` first), ``progress``, ``on_step``. Cancelled by
        ``stop_builds``, even one called before it started. Returns (exit status, last 400 lines)."""
        env = {**os.environ, **dict(self.builder.env)}
        log_path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | (os.O_APPEND if append else os.O_TRUNC), 0o600)
        with open(fd, "w", encoding="utf-8") as log:
            log.write(f"# stagecraft: {why}\n" * bool(why) + "$ " + " ".join(argv) + "\n")
            if why and progress is not None:  # a build run again: its counts start anew
                progress.reset()
            log.flush()
            proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    env=env, text=True, errors="replace")
            with self._lock:
                self._running.add(proc)
                if self._stopped:  # stop_builds ran before this build was in _running
                    proc.terminate()
            assert proc.stdout is not None
            tail: list[str] = []
            try:
                for line in proc.stdout:
                    log.write(line)
                    if progress is not None:
                        progress.feed(line)
                    tail = (tail + [line.rstrip()])[-400:]
                    step = step_started(line)
                    if step and on_step:
                        on_step(step)
                rc = proc.wait()
            except BaseException:
                proc.terminate()
                proc.wait()
                raise
            finally:
                with self._lock:
                    self._running.discard(proc)
        return rc, tail

    def _raise_failed(self, rc: int, tail: list[str], log_path: Path) -> None:
        """Raise the ``BuildError`` of a failed build: ``NameTaken``, its reason (``failure_reason``
        of ``tail``), or the engine's when it stopped answering or the connection broke."""
        if taken := name_taken(tail):  # built whole: the caller may use what the other build named
            raise NameTaken(f"build failed (exit {rc}): {NameTaken.SAID.format(taken)}; log: {log_path}", taken)
        reason = failure_reason(tail)
        if not self.answers():  # the client's last words are a symptom, not the cause
            raise BuildError(f"the Docker engine stopped answering during the build (the client said: {cut_middle(reason, 160)}); log: {log_path}")
        if LOST_RE.search(reason):
            reason = f"the client lost its connection to the Docker engine mid-build (it said: {cut_middle(reason, 160)})"
        raise BuildError(f"build failed (exit {rc}): {reason}; log: {log_path}")

    def _built_id(self, iid: str, metadata: Path) -> str:
        """The engine's id of the image a build wrote. The iidfile holds the config digest for a
        single-platform image; the containerd image store knows images by manifest digest, which
        buildx's metadata file names (``containerimage.digest``)."""
        if self.image_id(iid) is not None or not metadata.is_file():
            return iid
        digest = json.loads(metadata.read_text()).get("containerimage.digest", "")
        return digest if digest and self.image_id(digest) is not None else iid

    def answers(self, timeout_s: float = 10) -> bool:
        """Whether the daemon answers a ping within ``timeout_s`` s now (a new connection)."""
        try:
            return bool(docker.from_env(timeout=timeout_s).ping())
        except Exception:  # noqa: BLE001 - any failure to reach it is the answer
            return False

    def multi_platform(self) -> str:
        """'' when this engine can hold several platforms under one tag (an OCI image
        index: Docker with the containerd image store, built through buildx), else why
        not, naming the engine."""
        try:
            info = self.client.info()
        except docker.errors.DockerException as exc:
            return f"the engine does not answer `docker info` ({_short(exc)})"
        driver = dict(tuple(x) for x in info.get("DriverStatus") or () if len(x) == 2)
        name = f"Docker {info.get('ServerVersion', '?')}"
        if driver.get("driver-type") != "io.containerd.snapshotter.v1":
            return (f"{name} (image store: {info.get('Driver', '?')}, not the containerd "
                    "image store) keeps one platform per tag")
        if not self.uses_buildx:
            return f"{name}: the client {self.builder.describe()} has no buildx for multi-platform builds"
        return ""

    @property
    def rewrites_timestamps(self) -> bool:
        """Whether builds here export with ``rewrite-timestamp`` (``reproducible()`` is
        ''); asked of the engine once."""
        if self._rewrites is None:
            self._rewrites = not self.reproducible()
        return self._rewrites

    def reproducible(self) -> str:
        """'' when builds here can be bit-for-bit reproducible, else why not: BuildKit
        0.13 (Docker 25+; it dates config and history by SOURCE_DATE_EPOCH and can
        ``rewrite-timestamp``) through buildx with the containerd image store (OCI
        output). Docker 20.10's BuildKit 0.8 stamps the history with the build's time."""
        why = self.multi_platform()
        try:
            version = self.client.version().get("Version", "?")
        except docker.errors.DockerException as exc:
            return f"the engine does not answer ({_short(exc)})"
        major = int(version.split(".")[0]) if version[:1].isdigit() else 0
        if major and major < 25:
            return (f"Docker {version} embeds BuildKit 0.8, which dates the config and "
                    "history with the build's time, not SOURCE_DATE_EPOCH, and has no "
                    "rewrite-timestamp (BuildKit 0.13, Docker 25+, has both): two builds of "
                    "the same inputs get different digests")
        if why:
            return f"{why}; rewrite-timestamp exports need buildx and the containerd image store"
        return ""

    def assemble_index(self, ref: str, dockerfile: str, platforms: Iterable[str],
                       log_path: Path) -> str:
        """Tag ``ref`` as an OCI image index of images already built, one per platform of
        ``platforms``, without rebuilding them: ``dockerfile`` (``render.index_dockerfile``)
        has a ``FROM`` stage per platform, built with ``--platform`` listing them all.
        Needs ``multi_platform()``. Returns the index's image id. Raises ``BuildError``."""
        with tempfile.TemporaryDirectory(prefix="stagecraft-index-") as tmp:
            path = Path(tmp) / "Dockerfile"
            path.write_text(dockerfile)
            return self.build(path, Path(tmp), log_path, Path(tmp) / "iid", {},
                              extra_args=["--platform", ",".join(sorted(platforms)), "-t", ref])

    @property
    def uses_buildx(self) -> bool:
        """True when builds go through ``docker buildx build``."""
        return self.builder.argv[0] == "buildx"

    @property
    def containerd_store(self) -> bool:
        """True when the engine keeps images in the containerd image store (``docker
        info``: driver-type io.containerd.snapshotter.v1): sizes it reports are then
        the compressed content, not the unpacked layers."""
        if self._containerd is None:
            status = dict(tuple(p) for p in self.client.info().get("DriverStatus") or [] if len(p) == 2)
            self._containerd = status.get("driver-type") == "io.containerd.snapshotter.v1"
        return self._containerd

    def facts(self) -> EngineFacts:
        """What this engine and its BuildKit path are (``docker version``, ``docker
        info``, ``docker buildx inspect``), read once per Engine. Raises ``InputError``
        when no BuildKit path works (``detect_builder``)."""
        if self._facts is None:
            version = self.client.version()
            info = self.client.info()
            containerd = self.containerd_store
            b = self.builder
            buildx_version, fields = buildx_facts(b)
            self._facts = EngineFacts(
                engine_version=str(version.get("Version", "")),
                api_version=str(version.get("ApiVersion", "")),
                os=str(info.get("OperatingSystem", "")),
                storage=str(info.get("Driver", "")) + (" (containerd image store)" if containerd else ""),
                containerd_store=containerd,
                path="buildx" if b.argv[0] == "buildx" else "classic",
                client=f"{b.client} {b.version}",
                buildx_version=buildx_version, driver=fields.get("driver", ""),
                builder=fields.get("name", ""),
                buildkit_reported=fields.get("buildkit", ""),
                platforms=tuple(p.strip() for p in fields.get("platforms", "").split(",") if p.strip()))
        return self._facts
