"""Base stage: every image built on a base runs these (testinfra, against a container).

The expectations come from matrix.yaml through the `spec` fixture, so the same suite
checks Debian 12 and Debian 13 images.
"""

from __future__ import annotations


def test_os_release_matches_the_base(host, spec):
    info = host.system_info
    base = spec["base"]
    assert info.distribution == base["os"], f"{spec['tag']}: distribution {info.distribution}"
    assert info.release.split(".")[0] == base["version"], f"{spec['tag']}: release {info.release}"
    assert base["codename"] in host.file("/etc/os-release").content_string, spec["tag"]


def test_platform_is_the_one_built_for(host, spec, image_attrs):
    """The image's config and the machine its programs run as (under emulation for
    another platform than the host's) are the platform the tag was built for."""
    from stagecraft.platforms import get

    want = get(spec["platform"])
    assert f"{image_attrs['Os']}/{image_attrs['Architecture']}" == want.name, (
        f"{spec['tag']}: image is {image_attrs['Os']}/{image_attrs['Architecture']}, not {want.name}")
    machine = host.check_output("uname -m")
    assert machine == want.machine, f"{spec['tag']}: runs as {machine}, not {want.machine}"
    arch = host.check_output("dpkg --print-architecture")
    assert arch == want.deb, f"{spec['tag']}: dpkg architecture {arch}, not {want.deb}"


def test_python_is_the_distros_own(host, spec):
    out = host.check_output("python3 -c 'import sys; print(\"%d.%d\" % sys.version_info[:2])'")
    assert out == spec["base"]["python"], f"{spec['tag']}: python {out}"
    # No second Python: the distro's is the only interpreter outside the venv.
    extra = host.run("ls /usr/local/bin/python* /opt/conda 2>/dev/null").stdout.strip()
    assert extra == "", f"{spec['tag']}: a second Python: {extra}"


def test_tini_is_pid_1_of_the_image(host, spec, image_attrs):
    assert host.file("/usr/bin/tini").is_file, f"{spec['tag']}: no tini"
    entry = image_attrs["Config"]["Entrypoint"] or []
    assert entry[:1] == ["/usr/bin/tini"], f"{spec['tag']}: entrypoint {entry}"
    comm = host.file("/proc/1/comm").content_string.strip()
    assert comm == "tini", f"{spec['tag']}: PID 1 is {comm}"


def test_declared_packages_are_installed(host, spec):
    for pkg in spec["base"]["apt"]:
        assert host.package(pkg).is_installed, f"{spec['tag']}: {pkg} missing"


def test_default_user_is_non_root(host, spec, image_attrs):
    assert image_attrs["Config"]["User"] == "1000", f"{spec['tag']}: USER {image_attrs['Config']['User']}"
    assert host.user().uid == 1000, f"{spec['tag']}: runs as uid {host.user().uid}"
    assert host.user("worker").home == "/home/worker", spec["tag"]
    assert image_attrs["Config"]["WorkingDir"] == "/workspace", spec["tag"]
    ws = host.file("/workspace")
    assert ws.is_directory and ws.uid == 1000 and ws.gid == 0 and ws.mode & 0o070 == 0o070, (
        f"{spec['tag']}: /workspace owned {ws.uid}:{ws.gid} mode {oct(ws.mode)}")


def test_no_package_caches_in_layers(host, spec):
    lists = host.run("find /var/lib/apt/lists -type f ! -name lock").stdout.strip()
    assert lists == "", f"{spec['tag']}: apt lists left: {lists[:200]}"
    debs = host.run("find /var/cache/apt -name '*.deb'").stdout.strip()
    assert debs == "", f"{spec['tag']}: .deb files left: {debs[:200]}"
    pip_cache = host.run("find / -xdev -type d -path '*/.cache/pip' 2>/dev/null").stdout.strip()
    assert pip_cache == "", f"{spec['tag']}: pip cache left: {pip_cache}"


def test_home_holds_nothing_the_user_cannot_write(host, spec):
    # Owned by the user, or group 0 and group-writable (any uid runs with gid 0).
    foreign = host.run("find /home/worker /workspace ! -uid 1000 ! \\( -gid 0 -perm -g+w \\) "
                       "-print 2>/dev/null").stdout.split()
    assert foreign == [], f"{spec['tag']}: the user cannot write: {foreign[:10]}"


def test_tmp_holds_nothing_from_the_build(host, spec):
    found = host.run("find /tmp /var/tmp -mindepth 1 -maxdepth 1 ! -name 'stagecraft-*' "
                     "! -name 'jupyter-*' -print")
    # Its exit status first: an exec that failed said why on stdout (fault suite, seed 20261398).
    assert found.rc == 0, f"{spec['tag']}: find exited {found.rc}: {(found.stdout + found.stderr)[-500:]}"
    left = found.stdout.split()
    assert left == [], f"{spec['tag']}: build leftovers in /tmp: {left}"


def test_dpkg_and_apt_are_consistent_with_the_stand_ins(host, spec):
    """No half-installed package, no broken dependency (`apt-get check`, read-only: it
    needs no lock with Debug::NoLocking), and the base's stand-ins (matrix.yaml
    `apt_stand_ins`) marked by the one empty package, none of them really installed."""
    audit = host.run("dpkg --audit")
    assert audit.rc == 0 and audit.stdout.strip() == "", f"{spec['tag']}: dpkg --audit: {audit.stdout[:500]}"
    check = host.run("apt-get -o Debug::NoLocking=1 check")
    assert check.rc == 0, f"{spec['tag']}: apt-get check: {(check.stdout + check.stderr)[-500:]}"
    names = sorted(spec["base"].get("apt_stand_ins") or {})
    got = host.run("dpkg-query -W -f '${Status}|${Provides}' stagecraft-stand-ins")
    if not names:
        assert got.rc != 0, f"{spec['tag']}: stagecraft-stand-ins installed but the base has no stand-ins"
        return
    assert got.stdout == "install ok installed|" + ", ".join(names), f"{spec['tag']}: {got.stdout} {got.stderr}"
    for name in names:
        real = host.run("dpkg-query -W -f '${Status}' %s", name)
        # Unknown to dpkg (rc 1), or known and "not-installed": never "install ok installed".
        assert not real.stdout.endswith(" installed"), f"{spec['tag']}: {name} really installed: {real.stdout}"
    assert not host.file("/tmp/stagecraft-stand-ins").exists, f"{spec['tag']}: stand-in build tree left"
    assert not host.file("/tmp/stagecraft-stand-ins.deb").exists, f"{spec['tag']}: stand-in .deb left"
