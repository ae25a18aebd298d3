"""A small valid matrix, in the real format, that tests mutate."""

MINIMAL = """\
schema: 1
repository: example/fw
source: https://example.invalid/src
entrypoint:
  requirements: [nvidia-ml-py==13.580.82]
stages:
  base:
    template: base.Dockerfile.j2
    tests: [tests/image/test_base.py]
  runtime:
    template: runtime.Dockerfile.j2
    parents: [base]
    uses: [framework]
    copies: [entrypoint, probes]
    tests: [tests/image/test_runtime.py]
components:
  base:
    deb12:
      os: debian
      version: "12"
      codename: bookworm
      python: "3.11"
      source: bootstrap
      bootstrap: {mirror: http://deb.debian.org/debian, suite: bookworm, variant: minbase}
      apt:
        tini: {version: "0.19.*", why: "PID 1"}
        python3: {version: "3.11.*", why: "the one Python"}
        python3-venv: {version: "3.11.*", why: "venv"}
        ca-certificates: {version: "2023*", why: "TLS roots"}
  framework:
    six-1:
      package: six
      version: "1.16.0"
      import: six
      device: cpu
      build: {python: ["3.11"]}
    six-2:
      package: six
      version: "1.17.0"
      import: six
      device: cpu
images:
  - name: six
    chain: [base, runtime]
    axes:
      base: [deb12]
      framework: [six-1, six-2]
    tag: "{{ framework.version }}-cpu"
    aliases: ["{{ framework.version }}"]
"""
