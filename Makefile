# stagecraft: each target is a short recipe over build.py and pytest.
#   make setup               Python deps, Docker engine, debootstrap (no-op when present)
#   make image TAG=2.6.2-cpu build one image (tag, alias or unique prefix); PLATFORM=linux/amd64
#                            narrows it to one platform (engines without an image index)
#   make test                unit tests, then every image built once and validated
#                            (arm64 images under emulation: set-up registers qemu), on
#                            this host's engine and, the CPU images, on a modern one
#                            beside it that set-up makes or restarts (scripts/modern-engine.sh),
#                            and under rootless Podman (set-up: scripts/podman-setup.sh)
#   make lint                ruff, hadolint on every rendered Dockerfile, actionlint
#   make golden              regenerate the rendered-Dockerfile golden files
#   make push TAG=2.6.2-cpu REGISTRY=host:port  push a tested image, then its aliases
#   make bake                docker-bake.json for buildx (each stage a target)
#   make bench               benchmarks (see BENCHMARKS.md)
#   make fuzz                the property-based tests with the long budget (FUZZ_EXAMPLES per test)
#   make faults              the fault-injection suite: FAULTS trials (default 500) of five kinds,
#                            SEED (default: the clock), one JSON line per trial in FAULTS_OUT
# The project's .venv/ when set-up made one (externally managed system Python), else python3.
PYTHON ?= $(shell test -x .venv/bin/python && echo .venv/bin/python || echo python3)
TAG ?= 2.6.2-cpu
PLATFORM ?=
# Platforms set-up prepares emulation for (those other than the host's): the image's, or
# for `make test` every platform the matrix builds.
PLATFORMS ?= $(PLATFORM)
# `make test` also has set-up make the modern engine the tests run on beside this one.
SETUP_ARGS ?=

.PHONY: setup image test unit lint golden bench push bake fuzz faults
setup:
	STAGECRAFT_PLATFORMS=$(PLATFORMS) bash scripts/setup.sh $(SETUP_ARGS)

image: setup
	$(PYTHON) build.py --tag $(TAG) $(if $(PLATFORM),--platform $(PLATFORM))

unit:
	$(PYTHON) -m pytest tests/unit -q

test: PLATFORMS = linux/amd64,linux/arm64
test: SETUP_ARGS = --with-modern-engine --with-podman
# Each run's JUnit report (every test's seconds, set-up included) and CPU timeline (how
# busy the cores were during each test: tests/cputimeline.py) are kept under
# TEST_REPORTS, outside the checkout, so a CI run's figures outlive its clone; the newest
# 20 of each stay. `python3 bench/testrun.py` reads them.
TEST_REPORTS ?= /var/lib/stagecraft/test-reports
test: setup
	mkdir -p $(TEST_REPORTS)
	ls -1t $(TEST_REPORTS)/pytest-*.xml 2>/dev/null | tail -n +20 | xargs -r rm -f
	ls -1t $(TEST_REPORTS)/timeline-*.jsonl 2>/dev/null | tail -n +20 | xargs -r rm -f
	stamp=$$(date -u +%Y%m%dT%H%M%SZ); \
	$(PYTHON) -m pytest tests/unit tests/integration -q -rfEs --durations=40 \
	  --junitxml=$(TEST_REPORTS)/pytest-$$stamp.xml --cpu-timeline=$(TEST_REPORTS)/timeline-$$stamp.jsonl

lint:
	$(PYTHON) -m ruff check stagecraft probes entrypoint tests bench build.py
	$(PYTHON) -m pytest tests/unit/test_lint.py tests/unit/test_ci.py::test_workflows_pass_actionlint -q

# The fuzzers' long run: FUZZ_EXAMPLES examples for each of their tests (the matrix
# fuzzer's 6 tests, the lock fuzzer's 4 and the entrypoint's: the default 20000 makes about
# 200,000 examples of the first two, 2-3 hours on 2 cores; the entrypoint's runs about 60 ms
# an example in process, and a tenth and a 25th of that in real processes). `make test`
# runs the same tests with the short `ci` budget.
# Memory is capped at 4 GiB (ulimit -v): an input that made the tool grow without bound
# fails as a MemoryError instead of swapping.
FUZZ_EXAMPLES ?= 20000
fuzz:
	ulimit -v 4194304; FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(PYTHON) -m pytest tests/unit/test_fuzz.py \
	  tests/unit/test_lock_fuzz.py tests/unit/test_fuzz_entrypoint.py -q -p no:warnings \
	  --hypothesis-profile=long --hypothesis-show-statistics

# The fault-injection suite (issue 24, tests/faults): its own engine, project and registry;
# about 25 s a trial on 2 cores. `make test` runs one trial of each kind.
# FAULTS_PROJECT=real: 2.6.2-cpu of matrix.yaml instead of the small six project (the
# slow paths; minutes a trial, on an engine and a 12 GB data root of its own).
FAULTS ?= 500
SEED ?= $(shell date +%s)
FAULTS_OUT ?= faults.jsonl
FAULTS_PROJECT ?= six
faults: setup
	$(PYTHON) -m tests.faults --faults $(FAULTS) --seed $(SEED) --out $(FAULTS_OUT) --project $(FAULTS_PROJECT)

golden:
	STAGECRAFT_UPDATE_GOLDEN=1 $(PYTHON) -m pytest tests/unit/test_golden.py -q

bench: setup
	$(PYTHON) bench/build_bench.py
	$(PYTHON) bench/startup.py --runs 30
	$(PYTHON) bench/sizes.py

push:
	$(PYTHON) build.py push --tag $(TAG) $(if $(REGISTRY),--registry $(REGISTRY))

bake:
	$(PYTHON) build.py bake -o docker-bake.json
