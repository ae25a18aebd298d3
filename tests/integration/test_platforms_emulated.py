"""Platforms: one tag built for linux/amd64 and linux/arm64 as an OCI image index, the
arm64 half under emulation (qemu-user-static registered by set-up); each platform run
from the same tag (`docker run --platform ...`), validated by its testinfra suites,
pushed to a real registry and verified there as an index, by digest; an engine without an
image index refuses a multi-platform tag at plan time, and a platform without emulation
is refused before anything is built.

The image is `3.2.2-cpu` (platforms_build.TAG), built on an engine of its own (a third
container of the modern engine: Docker 26, buildx, the containerd image store). Its
emulated build and then its suites run in the background from the moment the session has
collected these tests (conftest, platforms_build: why): from nothing the build costs
about 7.5 minutes here when the machine is quiet, the arm64 suites about 2.5
(BENCHMARKS.md, "Platforms"). The arm64 `2.6.2-cpu` is left to a native arm64 runner (the
GitHub workflow) or a run by hand (README, Tests).
"""

from __future__ import annotations

import json
import shutil

import pytest
import requests

from stagecraft.engine import Engine
from stagecraft.platforms import emulation
from tests.integration import engines, platforms_build
from tests.integration.harness import run_cli

ARM_TAG = platforms_build.TAG
REPO = platforms_build.REPOSITORY
PLATFORMS = ("linux/amd64", "linux/arm64")
MACHINE = {"linux/amd64": "x86_64", "linux/arm64": "aarch64"}
NUMBERS = ("import json, platform, paddle\n"
           "x = paddle.to_tensor([[1., 2.], [3., 4.]])\n"
           "print(json.dumps({'machine': platform.machine(), 'version': paddle.__version__,"
           " 'matmul': paddle.matmul(x, x).numpy().tolist(),"
           " 'sum': float(paddle.arange(1, 101, dtype='float32').sum())}))")
INDEX_TYPES = ("application/vnd.oci.image.index.v1+json",
               "application/vnd.docker.distribution.manifest.list.v2+json")


@pytest.fixture(scope="module")
def platform_index() -> platforms_build.Built:
    """`3.2.2-cpu` for both platforms, one tag (the background build, waited for here)."""
    if "modern" not in engines.selected():
        pytest.skip("an image index needs the modern engine (STAGECRAFT_TEST_ENGINES leaves it out)")
    why = emulation("linux/arm64")
    if why:
        pytest.fail(f"{why}: `make test` registers it (scripts/setup.sh, STAGECRAFT_PLATFORMS)")
    try:
        built = platforms_build.start().result()
    except RuntimeError as exc:
        pytest.fail(f"{exc}; run `STAGECRAFT_MODERN_NAME={engines.PLATFORMS} bash scripts/modern-engine.sh up`")
    proc = built.proc
    assert proc.returncode == 0, f"build of {ARM_TAG} for {PLATFORMS} failed:\n{proc.stderr[-4000:]}"
    (image,) = json.loads(proc.stdout)["images"]
    assert sorted(image["platforms"]) == list(PLATFORMS), image
    print(f"{ARM_TAG} for {', '.join(PLATFORMS)} built in {built.seconds:.0f} s (background)")
    yield built
    shutil.rmtree(built.state, ignore_errors=True)


@pytest.fixture(scope="module")
def tested(platform_index):
    """`build.py test` on the tag: the suites of each platform, arm64 under emulation
    (run in the background right after the build)."""
    print(f"{ARM_TAG} tested in {platform_index.test_seconds:.0f} s (background)")
    return platform_index.tested


@pytest.mark.modern  # the modern engine's image, on its own container
@pytest.mark.parametrize("platform", PLATFORMS)
def test_one_tag_runs_each_platform_with_the_right_numbers(platform_index, platform):
    client = platform_index.engine.client()
    out = client.containers.run(f"{REPO}:{ARM_TAG}", ["python", "-c", NUMBERS], platform=platform,
                                remove=True, environment={"STAGECRAFT_QUIET": "1"})
    got = json.loads(out.decode().strip().splitlines()[-1])
    assert got["machine"] == MACHINE[platform], got
    assert got["version"] == ARM_TAG.split("-")[0], got
    assert got["matmul"] == [[7.0, 10.0], [15.0, 22.0]] and got["sum"] == 5050.0, got


@pytest.mark.modern  # the modern engine's image, on its own container
def test_arm64_entrypoint_chooses_the_arm_kernel_set(platform_index):
    client = platform_index.engine.client()
    out = client.containers.run(f"{REPO}:{ARM_TAG}", ["sh", "-c", "echo $STAGECRAFT_CHOSEN"],
                                platform="linux/arm64", remove=True, stderr=True)
    assert out.decode().strip().splitlines()[-1] == "cpu-armv8", out


@pytest.mark.modern  # the modern engine's image, on its own container
def test_suites_pass_on_each_platform(tested):
    assert tested.returncode == 0, f"suites failed:\n{tested.stdout[-3000:]}\n{tested.stderr[-6000:]}"
    for platform in PLATFORMS:
        assert f"on {platform}" in tested.stderr + tested.stdout, (platform, tested.stderr[-3000:])


@pytest.mark.modern  # the modern engine's image, on its own container
def test_pushed_tag_is_an_index_verified_by_digest(platform_index, tested):
    """Pushed to a real registry (the platforms engine's own), the tag is an OCI image
    index of exactly both platforms; push verified it before reporting it pushed, and
    `verify-index` agrees digest for digest."""
    assert tested.returncode == 0, "untested: see test_suites_pass_on_each_platform"
    engine, state = platform_index.engine, str(platform_index.state)
    registry = engine.registry_from_host
    proc = engine.cli("push", "--tag", ARM_TAG, "--registry", registry, "--repository", REPO,
                      "--state-dir", state, "--json", timeout=1800)
    assert proc.returncode == 0, f"push failed:\n{proc.stderr[-4000:]}"
    (img,) = json.loads(proc.stdout)["images"]
    assert img["status"] == "pushed" and sorted(img["platforms"]) == list(PLATFORMS), img
    head = requests.head(f"http://{registry}/v2/{REPO}/manifests/{ARM_TAG}",
                         headers={"Accept": ", ".join(INDEX_TYPES)}, timeout=30)
    assert head.status_code == 200, head.status_code
    assert head.headers["Content-Type"] in INDEX_TYPES, head.headers["Content-Type"]
    assert head.headers["Docker-Content-Digest"] == img["digest"], (head.headers, img)
    check = engine.cli("verify-index", "--tag", ARM_TAG, "--registry", registry, "--repository", REPO,
                       "--insecure", "--json", timeout=600)
    assert check.returncode == 0, check.stderr
    verified = json.loads(check.stdout)
    assert verified["digest"] == img["digest"] and verified["platforms"] == img["platforms"], (verified, img)


def test_engine_without_an_index_refuses_a_multi_platform_tag(client):
    engine = Engine()
    why = engine.multi_platform()
    if not why:
        pytest.skip("this engine holds image indexes (containerd image store)")
    before = {i.id for i in client.images.list(all=True)}
    # Asked for explicitly (without --platform the host's platform is built, said once).
    proc = run_cli("--tag", ARM_TAG, "--platform", "linux/amd64,linux/arm64")
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "keeps one platform per tag" in lines[0], lines
    assert "--platform" in lines[0]
    assert {i.id for i in client.images.list(all=True)} == before, "a refused build made an image"


def test_emulated_platform_without_qemu_is_refused(tmp_path, monkeypatch, capsys):
    """The plan-time check reads binfmt_misc: a host where it is not set up is refused
    with exit 2 before anything is built (an empty directory stands in for it)."""
    from stagecraft import platforms
    from stagecraft.cli import main

    monkeypatch.setattr(platforms.emulation, "__defaults__", (tmp_path,))
    code = main(["--tag", ARM_TAG, "--platform", "linux/arm64", "--repository", REPO + "-none"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2, err
    assert len(err) == 1 and "binfmt_misc is not mounted" in err[0] and "STAGECRAFT_PLATFORMS" in err[0], err
