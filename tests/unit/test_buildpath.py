"""The command line of one BuildKit build (stagecraft/buildpath.py ``build_argv``), on
both paths a host may have: buildx and a classic client with DOCKER_BUILDKIT=1."""

from __future__ import annotations

from pathlib import Path

from stagecraft.buildpath import Builder, build_argv

BUILDX = Builder("/usr/bin/docker", ("buildx", "build", "--load", "--provenance=false"), (), "28.0")
CLASSIC = Builder("/usr/bin/docker", ("build",), (("DOCKER_BUILDKIT", "1"),), "20.10.24")
D, C, IID = Path("/s/ctx/Dockerfile"), Path("/s/ctx"), Path("/s/iid")


def _argv(builder: Builder, **given) -> list[str]:
    options = dict(secrets={}, build_args={}, extra_args=(), source_date_epoch=0, layout=None,
                   provenance=False, metadata=Path("/s/iid.metadata.json"))
    return build_argv(builder, D, C, IID, **{**options, **given})


def test_a_plain_build_loads_into_the_engine_on_either_path():
    assert _argv(CLASSIC) == ["/usr/bin/docker", "build", "--progress=plain", "-f", str(D),
                              "--iidfile", str(IID), str(C)]
    assert _argv(BUILDX) == ["/usr/bin/docker", "buildx", "build", "--load", "--provenance=false",
                             "--progress=plain", "-f", str(D), "--iidfile", str(IID),
                             "--metadata-file", "/s/iid.metadata.json", str(C)]


def test_a_reproducible_build_exports_a_layout_with_its_provenance():
    argv = _argv(BUILDX, source_date_epoch=1700000000, layout=Path("/s/iid.oci"), provenance=True)
    assert "--load" not in argv and "--provenance=false" not in argv
    # The steps fix the file times (stagecraft/steptimes.py): no rewrite pass unless asked.
    assert argv[1:6] == ["buildx", "build", "--provenance=mode=min", "--output",
                         "type=oci,dest=/s/iid.oci,tar=false"]
    assert argv[argv.index("--build-arg") + 1] == "SOURCE_DATE_EPOCH=1700000000"
    rewritten = _argv(BUILDX, source_date_epoch=1700000000, layout=Path("/s/iid.oci"),
                      provenance=True, rewrite_timestamps=True)
    assert rewritten[5] == "type=oci,dest=/s/iid.oci,tar=false,rewrite-timestamp=true"
    assert _argv(BUILDX, layout=Path("/s/iid.oci"), rewrite_timestamps=True)[5] == \
        "type=oci,dest=/s/iid.oci,tar=false"  # no epoch: nothing to rewrite to
    no_epoch = _argv(BUILDX, layout=Path("/s/iid.oci"))
    assert "type=oci,dest=/s/iid.oci,tar=false" in no_epoch and "--provenance=false" in no_epoch
    assert not any(a.startswith("SOURCE_DATE_EPOCH") for a in no_epoch)


def test_secrets_and_build_args_sorted_and_an_environment_value_passed_by_name(monkeypatch):
    monkeypatch.setenv("HTTPS_PROXY", "http://user:secret@proxy:3128")
    argv = _argv(CLASSIC, secrets={"z": Path("/z"), "ca": Path("/ca.pem")},
                 build_args={"HTTPS_PROXY": "http://user:secret@proxy:3128", "A": "1"},
                 extra_args=["--platform", "linux/arm64"])
    assert argv[argv.index("--iidfile") + 2:] == [
        "--secret", "id=ca,src=/ca.pem", "--secret", "id=z,src=/z",
        "--build-arg", "A=1", "--build-arg", "HTTPS_PROXY",
        "--platform", "linux/arm64", str(C)]
    assert not any("secret@" in a for a in argv)
    monkeypatch.setenv("HTTPS_PROXY", "http://other:3128")  # not the environment's: by value
    assert "HTTPS_PROXY=http://user:secret@proxy:3128" in _argv(
        CLASSIC, build_args={"HTTPS_PROXY": "http://user:secret@proxy:3128"})
