"""Platforms as data: the platform table, per-platform bases and keys, the kernel sets an
arm64 image carries, and the entrypoint's choice on real Neoverse captures (cpuinfo from
archspec's test data) with cgroup limits, as on x86."""

from __future__ import annotations

from pathlib import Path

import pytest

from probes import probe_all
from probes.cpu import parse_cpuinfo
from probes.select import EXIT_REFUSED, Overrides, choose
from stagecraft import platforms
from stagecraft.bases import base_image
from stagecraft.expand import expand, resolve
from stagecraft.matrix import load_matrix
from stagecraft.plan import make_plan
from stagecraft.render import image_manifest
from tests.conftest import ROOT
from tests.fixtures.compose import CPUINFO, compose

MATRIX = load_matrix(ROOT / "matrix.yaml")
SPECS = expand(MATRIX)
NEOVERSE = {"linux-amazon-neoverse_v1": ("sve", "bf16", "i8mm"),
            "linux-rhel9-neoverse_v2": ("sve", "sve2", "bf16", "i8mm")}


def test_names_are_normalised():
    assert platforms.normalise("linux/arm64/v8") == "linux/arm64"
    assert platforms.normalise("Linux/AMD64") == "linux/amd64"
    assert platforms.get("linux/aarch64").deb == "arm64"
    with pytest.raises(KeyError):
        platforms.get("linux/mips")


def test_emulation_reads_binfmt_misc(tmp_path: Path):
    foreign = "linux/arm64" if platforms.host_platform() != "linux/arm64" else "linux/amd64"
    qemu = platforms.get(foreign).qemu
    assert platforms.emulation(platforms.host_platform(), tmp_path) == ""
    assert "binfmt_misc is not mounted" in platforms.emulation(foreign, tmp_path)
    (tmp_path / "status").write_text("enabled\n")
    assert f"qemu-{qemu} is not registered" in platforms.emulation(foreign, tmp_path)
    (tmp_path / f"qemu-{qemu}").write_text("disabled\ninterpreter /usr/libexec/qemu-binfmt/x\n")
    assert "is disabled" in platforms.emulation(foreign, tmp_path)
    (tmp_path / f"qemu-{qemu}").write_text("enabled\ninterpreter /usr/libexec/qemu-binfmt/x\n")
    assert platforms.emulation(foreign, tmp_path) == ""


def test_the_matrix_declares_arm64_where_wheels_exist():
    by_tag = {s.tag: s.platforms for s in SPECS}
    assert by_tag["2.6.2-cpu"] == by_tag["3.2.2-cpu"] == ("linux/amd64", "linux/arm64")
    assert by_tag["3.3.1-cpu-debian12"] == ()  # the host's


def test_bootstrap_base_per_architecture():
    spec = resolve(SPECS, "3.2.2-cpu")
    amd, arm = (base_image(spec.base, "bootstrap", p) for p in ("linux/amd64", "linux/arm64"))
    assert (amd.arch, arm.arch) == ("amd64", "arm64")
    assert "-arm64-" in arm.ref and amd.ref != arm.ref and amd.identity != arm.identity
    pulled = {base_image(spec.base, "pull", p).identity for p in ("linux/amd64", "linux/arm64")}
    assert len(pulled) == 2, "one index digest, two platforms: two identities"


def _plan(tag: str, wanted: tuple[str, ...]):
    spec = resolve(SPECS, tag)
    bases = {(spec.base["name"], p): base_image(spec.base, "bootstrap", p) for p in wanted}
    return make_plan(MATRIX, [spec], bases, "0" * 40, "2026-01-01T00:00:00Z", None,
                     {spec.tag: wanted})


def test_one_key_per_stage_and_platform():
    plan = _plan("3.2.2-cpu", ("linux/amd64", "linux/arm64"))
    amd, arm = plan.images
    assert (amd.platform, arm.platform) == ("linux/amd64", "linux/arm64")
    assert not set(amd.keys) & set(arm.keys), "a key is one (stage, platform)"
    assert {plan.nodes[k].base.platform for k in arm.keys} == {"linux/arm64"}
    # the amd64 chain is the one a plan for the host alone makes (x86 hosts: same keys)
    if platforms.host_platform() == "linux/amd64":
        spec = resolve(SPECS, "3.2.2-cpu")
        host = make_plan(MATRIX, [spec], {spec.base["name"]: base_image(spec.base, "bootstrap")},
                         "0" * 40, "2026-01-01T00:00:00Z")
        assert host.images[0].keys == amd.keys


def test_arm64_images_carry_the_arm_kernel_set_only_there():
    spec = resolve(SPECS, "2.6.2-cpu")
    arm = [k["name"] for k in image_manifest(MATRIX, spec, "linux/arm64")["kernel_sets"]]
    amd = [k["name"] for k in image_manifest(MATRIX, spec, "linux/amd64")["kernel_sets"]]
    assert "cpu-armv8" in arm and "cpu-armv8" not in amd
    assert amd == [n for n in arm if n != "cpu-armv8"]


@pytest.mark.parametrize("capture", sorted(NEOVERSE))
def test_neoverse_features(capture: str):
    info = parse_cpuinfo((CPUINFO / capture).read_text())
    assert info["arch"] == "aarch64" and info["vendor"] == "ARM"
    assert {"asimd", *NEOVERSE[capture]} <= info["flags"]
    assert ("sve2" in info["flags"]) == (capture.endswith("v2"))


@pytest.mark.parametrize("capture", sorted(NEOVERSE))
def test_arm64_image_on_neoverse_with_a_cpu_quota(capture: str, tmp_path: Path):
    root = compose(tmp_path / "root", capture, ["cgroup-v1-quota-1.5"])
    probes = probe_all(str(root), 1.0, ["cpu"])
    cpu = probes["cpu"]
    assert cpu.arch == "aarch64" and cpu.isa_level is None
    assert cpu.quota_cpus == 1.5 and cpu.effective_cpus == 2, cpu
    spec = resolve(SPECS, "3.2.2-cpu")
    arm_sets = image_manifest(MATRIX, spec, "linux/arm64")["kernel_sets"]
    chosen = choose(probes, arm_sets, Overrides())
    assert chosen.name == "cpu-armv8" and chosen.exit_code == 0, chosen
    # the x86 image on the same machine refuses cleanly (78), naming what is missing
    amd_sets = image_manifest(MATRIX, spec, "linux/amd64")["kernel_sets"]
    refused = choose(probes, amd_sets, Overrides())
    assert refused.refused and refused.exit_code == EXIT_REFUSED
    assert any("avx" in p.reason for p in refused.passed_over), refused.passed_over


# /proc/self/auxv of python3 in the arm64 image of 3.2.2-cpu run by qemu-user 7.2 (Debian 12)
# on this project's x86-64 machine (`docker run --platform linux/arm64`): the guest's own
# HWCAP bits, while /proc/cpuinfo there shows the host's AMD EPYC.
QEMU_AUXV = ROOT / "tests" / "fixtures" / "auxv" / "qemu-7.2-aarch64-on-x86_64.auxv"


def test_hwcap_names_are_the_features_line():
    """The Features line of a real Neoverse V1 is the HWCAP bits, named in bit order."""
    from probes import hwcap

    features = parse_cpuinfo((CPUINFO / "linux-amazon-neoverse_v1").read_text())["flags"]
    bits = sum(1 << hwcap.HWCAP.index(f) for f in features if f in hwcap.HWCAP)
    bits2 = sum(1 << hwcap.HWCAP2.index(f) for f in features if f in hwcap.HWCAP2)
    assert hwcap.aarch64_features(bits, bits2) == features


def test_emulated_arm64_takes_features_from_auxv_not_the_hosts_cpuinfo():
    from probes import cpu

    host = parse_cpuinfo((CPUINFO / "linux-rocky8.5-zen4").read_text())
    notes: list[str] = []
    arch, flags = cpu._emulated(str(host["arch"]), host["flags"], notes, "aarch64",
                                QEMU_AUXV.read_bytes())
    assert arch == "aarch64" and {"asimd", "sve", "sve2", "bf16", "i8mm"} <= flags
    assert "avx512f" not in flags and "emulated aarch64" in notes[0]
    # natively nothing changes
    same = cpu._emulated("aarch64", frozenset({"asimd"}), [], "aarch64", b"")
    assert same == ("aarch64", frozenset({"asimd"}))
    assert cpu._emulated("x86_64", host["flags"], [], "x86_64", b"")[1] == host["flags"]
