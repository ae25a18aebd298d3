"""The README's Kubernetes manifest (deploy/kubernetes/pod.yaml), played as it is by
rootless ``podman kube play`` (Podman 4.3, Debian 12), with the stand-in GPU.

What Podman 4.3 does with the manifest's probes (seen here, and in its source:
pkg/specgen/generate/kube/kube.go, setupLivenessProbe): the livenessProbe becomes the
container's health check (its exec command plus ``|| exit 1``; periodSeconds, timeoutSeconds,
failureThreshold, initialDelaySeconds as interval, timeout, retries and start period). The
readinessProbe is ignored (no Service to take the Pod out of), startupProbe came in 4.4
(containers/podman#16794). Podman runs health checks from systemd timers; with no
systemd user session (this machine) none are scheduled ("unable to get systemd
connection"), so the test fires the probe with ``podman healthcheck run``, as the timer
would, and reads the container's health as Podman records it. After failureThreshold
failures Podman restarts the container (restartPolicy: Always), as the kubelet does.

How the GPU gets in: not through the manifest. On Kubernetes the node does it (the
NVIDIA device plugin for ``nvidia.com/gpu`` and the container toolkit); here the
node's part is a containers.conf (CONTAINERS_CONF, for this test's podman only) whose
``devices`` and ``volumes`` add the stand-in's nodes, its libnvidia-ml and its answers to
every container, and this tree's entrypoint and the GPU tag's image.json. The image the
manifest names is the CPU image tagged with that name in the rootless store for the
test's duration (a test image with the same entrypoint: no 7 GB copy).
"""
from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml

from tests.integration import rootless
from tests.nvml_standin import cdi, standin

pytestmark = pytest.mark.podman

REPO = Path(__file__).resolve().parents[2]
MANIFEST = REPO / "deploy" / "kubernetes" / "pod.yaml"
CPU_IMAGE = "stagecraft/paddle:2.6.2-cpu"


def _pod() -> dict:
    return yaml.safe_load(MANIFEST.read_text())


def _gpu_manifest(tag: str) -> dict:
    from stagecraft.expand import expand
    from stagecraft.matrix import load_matrix
    from stagecraft.render import image_manifest

    matrix = load_matrix(REPO / "matrix.yaml")
    spec = next(s for s in expand(matrix) if s.tag == tag or tag in s.aliases)
    return image_manifest(matrix, spec)


@pytest.fixture(scope="module")
def node() -> Iterator[dict[str, Path]]:
    """The node's part: a directory the rootless user can read with the stand-in library,
    its answers (an A100; ``nvml``), the GPU tag's image.json, and ``conf``, the
    containers.conf that gives them to every container."""
    why = rootless.not_ready()
    if why:
        pytest.fail(why)
    d = Path(tempfile.mkdtemp(prefix=f"{rootless.PREFIX}-kube-"))
    try:
        d.chmod(0o755)
        lib = standin.build(d)
        for p in (lib.parent, lib):
            p.chmod(0o755)
        tag = _pod()["spec"]["containers"][0]["image"].rpartition(":")[2]
        (d / "image.json").write_text(json.dumps(_gpu_manifest(tag)))
        nvml = d / "nvml.conf"
        nvml.write_text((REPO / "tests/fixtures/nvml/a100.conf").read_text())
        devices = [f"/dev/null:{n}" for n in ("/dev/nvidia0", *cdi.CONTROL_NODES)]
        volumes = [f"{lib}:{cdi.LIBRARY_DIR}/{cdi.SONAME}:ro", f"{nvml}:{cdi.CONFIG_PATH}:ro",
                   f"{d}/image.json:/etc/stagecraft/image.json:ro",
                   f"{REPO}/entrypoint:/opt/stagecraft/entrypoint:ro", f"{REPO}/probes:/opt/stagecraft/probes:ro"]
        # CONTAINERS_CONF replaces the user's file: its [engine] settings come along
        import pwd

        user_conf = Path(pwd.getpwnam(rootless.USER).pw_dir) / ".config/containers/containers.conf"
        conf = d / "containers.conf"
        conf.write_text(f"{user_conf.read_text()}\n[containers]\ndevices = {json.dumps(devices)}\n"
                        f"volumes = {json.dumps(volumes)}\n")
        for p in (d / "image.json", nvml, conf):
            p.chmod(0o644)
        yield {"dir": d, "nvml": nvml, "conf": conf}
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def played(node: dict[str, Path], built) -> Iterator[tuple[str, dict[str, str]]]:
    """``podman kube play`` of the manifest file itself; yields (container name, the env
    that selects the node's containers.conf). Removes the pod and the tag after.
    ``built``: the host's images are built first, however this module is started."""
    env = {"CONTAINERS_CONF": str(node["conf"])}
    image_id = rootless.load_from_docker(CPU_IMAGE)
    pod = _pod()
    ref = pod["spec"]["containers"][0]["image"]
    local = ref if ref.startswith("localhost/") else f"localhost/{ref}"
    there = rootless.podman("image", "inspect", "--format", "{{.Id}}", local, check=False)
    if there.returncode == 0 and not image_id.endswith(there.stdout.strip()):
        raise AssertionError(f"the rootless store holds another image named {local}: remove it (podman rmi {local})")
    rootless.podman("tag", image_id, local)
    try:
        rootless.podman("kube", "play", "--replace", str(MANIFEST), env=env, timeout=300)
        yield f"{pod['metadata']['name']}-{pod['spec']['containers'][0]['name']}", env
    finally:
        rootless.podman("kube", "down", str(MANIFEST), env=env, check=False, timeout=120)
        rootless.podman("untag", image_id, local, check=False)


def _health(name: str, env: dict[str, str]) -> dict:
    out = rootless.podman("inspect", "--format", "{{json .State.Health}}", name, env=env).stdout
    return json.loads(out)


def _logs_until(name: str, env: dict[str, str], done: Callable[[str], bool], seconds: float = 60) -> str:
    """The container's log (every start's, as Podman keeps them) once ``done(log)``, or
    at ``seconds``."""
    import time

    deadline = time.monotonic() + seconds
    while True:
        cp = rootless.podman("logs", name, env=env, check=False)
        logs = cp.stdout + cp.stderr
        if done(logs) or time.monotonic() >= deadline:
            return logs
        time.sleep(1)


def _keep_running(name: str, env: dict[str, str], seconds: float = 90) -> int:
    """Waits until the container runs (two looks a second apart see the same start) and
    returns how many times it started the pod to get there, as the kubelet keeps a Pod's
    containers running: Podman 4.3's restart after the last failing probe races with kube
    play's pod exit policy ("stop": the pod stops once its only container has stopped).
    Under load the pod has been seen stopped before the restart (exit 125 from the
    health check), after it (the new start printed, then stopped), and with no new start
    at all. Raises AssertionError when the container does not run within ``seconds``."""
    import time

    pod = _pod()["metadata"]["name"]
    deadline = time.monotonic() + seconds
    started, seen, stopped = 0, None, 0
    while time.monotonic() < deadline:
        state = rootless.podman("inspect", "--format", "{{.State.Status}} {{.State.StartedAt}}", name,
                                env=env, check=False).stdout.strip()
        if state.startswith("running "):
            if state == seen:
                return started
            seen, stopped = state, 0
        else:
            seen, stopped = None, stopped + 1
            if stopped >= 2:
                rootless.podman("pod", "start", pod, env=env, check=False)
                started, stopped = started + 1, 0
        time.sleep(1)
    ps = rootless.podman("ps", "--all", "--pod", env=env, check=False)
    raise AssertionError(f"{name} not running after {seconds:.0f} s and {started} pod starts: {ps.stdout}{ps.stderr}")


def test_kube_play_runs_the_probes_of_the_manifest(played: tuple[str, dict[str, str]], node: dict[str, Path]) -> None:
    """The livenessProbe of the README's manifest becomes the container's health check;
    fired, it is healthy on the stand-in A100 and, once NVML answers "Unknown Error"
    (999, a revoked device), fails: after failureThreshold failures Podman marks the
    container unhealthy and restarts it (restartPolicy: Always, as the kubelet does); the
    new start falls back to a CPU kernel set and is healthy again."""
    import time

    name, env = played
    probe = _pod()["spec"]["containers"][0]["livenessProbe"]
    attrs = json.loads(rootless.podman("inspect", name, env=env).stdout)[0]
    hc = attrs["Config"]["Healthcheck"]
    assert hc["Test"][1:len(probe["exec"]["command"]) + 1] == probe["exec"]["command"], hc
    assert (hc["Interval"], hc["Timeout"], hc["Retries"], hc["StartPeriod"]) == (
        probe["periodSeconds"] * 10**9, probe["timeoutSeconds"] * 10**9, probe["failureThreshold"],
        probe["initialDelaySeconds"] * 10**9), hc
    assert attrs["Config"]["User"] == "54321:0" and attrs["HostConfig"]["ReadonlyRootfs"], (
        attrs["Config"]["User"], attrs["HostConfig"]["ReadonlyRootfs"])
    logs = _logs_until(name, env, lambda text: "stagecraft: " in text)
    assert "stagecraft: cuda (1x NVIDIA A100" in logs, logs[-2000:]

    ok = rootless.podman("healthcheck", "run", name, env=env, check=False)
    health = _health(name, env)
    assert ok.returncode == 0 and health["Status"] == "healthy", (ok.stdout + ok.stderr, health)
    assert health["Log"][-1]["Output"].strip() == "healthy: 1 NVIDIA GPU answer NVML", health

    with open(node["nvml"], "a") as f:  # in place: the container's bind mount sees the same file
        f.write("init_error=999\n")
    # Failures inside the start period (initialDelaySeconds) do not count, in Podman as in
    # Kubernetes (whose probes do not run before it): fire the failing ones after it.
    started = int(rootless.podman("inspect", "--format", "{{.State.StartedAt.Unix}}", name, env=env).stdout)
    time.sleep(max(0.0, started + probe["initialDelaySeconds"] + 1 - time.time()))
    threshold = probe["failureThreshold"]
    for i in range(threshold):
        bad = rootless.podman("healthcheck", "run", name, env=env, check=False)
        # The last failure makes Podman restart the container inside this command; losing
        # the race (below) there is exit 125 "restarting container after health-check
        # turned unhealthy: cannot get namespace path ...".
        lost = (i == threshold - 1 and bad.returncode == 125
                and "restarting container after health-check turned unhealthy" in bad.stderr)
        assert bad.returncode == 1 or lost, f"failure {i + 1}: exit {bad.returncode}: {bad.stdout}{bad.stderr}"
    # Podman 4.3 restarts the container once failureThreshold failures are counted (the
    # Pod's restartPolicy: Always), as the kubelet would; its entrypoint probes again, finds
    # NVML failing and falls back to a CPU kernel set; the probe is then healthy again.
    pod_starts = _keep_running(name, env)
    logs = _logs_until(name, env, lambda text: text.count("stagecraft: ") >= 2)
    starts = [ln for ln in logs.splitlines() if ln.startswith("stagecraft: ")]
    assert len(starts) >= 2 and all(s.startswith("stagecraft: cpu") and "NVML error 999" in s for s in starts[1:]), (
        f"no restart into the CPU fallback after {threshold} failures ({pod_starts} pod starts): {starts}; "
        f"health {_health(name, env)}")
    for _ in range(3):
        again = rootless.podman("healthcheck", "run", name, env=env, check=False)
        if not (again.returncode == 125 and "is not running" in again.stderr):
            break
        pod_starts += _keep_running(name, env)  # the race lost after the look above
    health = _health(name, env)
    assert again.returncode == 0 and health["Status"] == "healthy", (again.stdout + again.stderr, health)
    assert health["Log"][-1]["Output"].strip().startswith("healthy: cpu"), health
