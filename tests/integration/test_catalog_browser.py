"""`build.py catalog` as a person uses it: the site opened in a real browser (Debian's
chromium, driven by Selenium through /usr/bin/chromedriver, headless, offline), a machine
chosen in the selector and the answer read, every link followed, no console errors, and a
screenshot of the overview saved for CI to keep.

Two sites: one from the fixture facts (tests/fixtures/catalog/facts.json; no Docker),
and one from the images this test run built (marked docker; it also times the command
and shows a label that disagrees with the image's contents, flagged).

Screenshots go to $STAGECRAFT_CATALOG_SHOTS, else .stagecraft/catalog-shots/ (the
state directory CI keeps as an artifact).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urldefrag, urlparse

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from probes.report import probes_from_dict
from stagecraft.catalog import hardware
from tests.nvml_standin import standin
from tests.unit.test_catalog_answers import MACHINES, probe

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
FACTS = REPO / "tests" / "fixtures" / "catalog" / "facts.json"
SHOTS = Path(os.environ.get("STAGECRAFT_CATALOG_SHOTS") or REPO / ".stagecraft" / "catalog-shots")
BUDGET_S = 10  # the bound for `build.py catalog` on the test run's images


def catalog(*args: str, docker_host: str | None = "unix:///nonexistent/docker.sock") -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STAGECRAFT_")}
    if docker_host:
        env["DOCKER_HOST"] = docker_host
    return subprocess.run([sys.executable, str(REPO / "build.py"), "catalog", *args], cwd=REPO,
                          capture_output=True, text=True, env=env, timeout=300, check=False)


@pytest.fixture(scope="module")
def browser() -> Iterator:
    """Headless chromium with its console log kept; fails (not skips) when it is missing:
    scripts/setup.sh installs it."""
    for path in (CHROMIUM, CHROMEDRIVER):
        if not Path(path).exists():
            pytest.fail(f"{path} is missing: run scripts/setup.sh (apt-get install chromium chromium-driver)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    with tempfile.TemporaryDirectory(prefix="catalog-chromium-") as profile:
        for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync", "--no-first-run",
                    f"--user-data-dir={profile}", "--window-size=1900,1000"):
            opts.add_argument(arg)
        opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
        try:
            yield driver
        finally:
            driver.quit()


def console_errors(driver) -> list[str]:
    return [e["message"] for e in driver.get_log("browser") if e.get("level") == "SEVERE"]


def crawl(driver, site: Path) -> list[str]:
    """Open every page reachable from the overview by its links (and every script and
    style sheet they load); returns the pages visited. Fails on a broken link, a link
    that leaves the site, or a console error on any page."""
    todo, seen = [(site / "index.html").resolve().as_uri()], set()
    driver.get_log("browser")  # drop what came before
    while todo:
        url = todo.pop()
        if url in seen:
            continue
        seen.add(url)
        path = Path(urlparse(url).path)
        assert path.is_file(), f"broken link: {url}"
        assert site.resolve() in path.resolve().parents, f"a link leaves the site: {url}"
        if path.suffix != ".html":
            continue
        driver.get(url)
        assert driver.find_elements("css selector", "nav"), f"{url}: not a catalog page ({driver.title})"
        for el in driver.find_elements("css selector", "a[href], script[src], link[href]"):
            ref = el.get_attribute("href") or el.get_attribute("src")
            if ref and not ref.startswith("data:"):
                assert ref.startswith("file://"), f"{url}: {ref} is not a file of the site"
                todo.append(urldefrag(ref)[0])
        errors = console_errors(driver)
        assert not errors, f"{url}: console errors: {errors}"
    return sorted(seen)


def choose(driver, site: Path, cpu: str, cc: str, driver_version: str) -> str:
    """Choose a machine on the selector page as a person does; the tag it names ('' none)."""
    from selenium.webdriver.support.ui import Select

    driver.get((site / "select.html").resolve().as_uri())
    Select(driver.find_element("id", "platform")).select_by_value(hardware.CPUS[cpu][1])
    Select(driver.find_element("id", "cpu")).select_by_value(cpu)
    Select(driver.find_element("id", "gpu")).select_by_value(f"{cc}|" if cc != hardware.NO_GPU else "none")
    if cc != hardware.NO_GPU:
        box = driver.find_element("id", "driver")
        box.clear()
        box.send_keys(driver_version)
    best = driver.find_elements("id", "best")
    assert best, driver.find_element("id", "answer").text
    assert driver.find_element("id", "why").text.startswith("Why: "), driver.find_element("id", "answer").text
    return best[0].get_attribute("data-tag")


def screenshot(driver, site: Path, name: str) -> Path:
    SHOTS.mkdir(parents=True, exist_ok=True)
    driver.get((site / "index.html").resolve().as_uri())
    out = SHOTS / name
    assert driver.save_screenshot(str(out)), out
    assert out.stat().st_size > 10_000, f"{out}: an empty screenshot?"
    return out


def test_fixture_site_links_console_and_screenshot(browser, tmp_path: Path) -> None:
    site = tmp_path / "site"
    cp = catalog("-o", str(site), "--facts", str(FACTS))
    assert cp.returncode == 0, cp.stderr
    pages = crawl(browser, site)
    assert len([p for p in pages if p.endswith(".html")]) == 3 + len(list((site / "tags").iterdir())), pages
    screenshot(browser, site, "overview-fixture-facts.png")


def test_selector_answers_equal_probe_on_the_stand_in_machines(browser, tmp_path: Path) -> None:
    # Nothing built (no engine for either): the probe command and the table rank alike.
    site = tmp_path / "site"
    assert catalog("-o", str(site)).returncode == 0
    lib = standin.build(tmp_path / "nvml")
    grid = hardware.driver_grid()
    for case, cpuinfo, pieces, nvml, _expected in MACHINES:
        data = probe(tmp_path / case.replace(" ", "-"), cpuinfo, pieces, nvml, lib)
        probes = probes_from_dict(data["host"]["probes"])
        cpu, cc, _ = hardware.machine_of(probes, grid)
        drv = probes["nvidia"].driver_version
        page = choose(browser, site, cpu, cc, drv)
        assert page == (data["best"]["tag"] or ""), f"{case}: the page says {page!r}, probe {data['best']}"
    assert not console_errors(browser)


def test_selector_says_when_a_driver_is_below_the_table(browser, tmp_path: Path) -> None:
    from selenium.webdriver.support.ui import Select

    site = tmp_path / "site"
    assert catalog("-o", str(site)).returncode == 0
    browser.get((site / "select.html").resolve().as_uri())
    Select(browser.find_element("id", "gpu")).select_by_value("9.0|")
    box = browser.find_element("id", "driver")
    box.clear()
    box.send_keys("390.12")
    assert "not in the table" in browser.find_element("id", "answer-error").text
    assert not browser.find_elements("id", "best")


@pytest.mark.docker
def test_site_from_the_built_images(browser, built, client, tmp_path: Path) -> None:
    site = tmp_path / "site"
    started = time.monotonic()
    cp = catalog("-o", str(site), "--json", docker_host=os.environ.get("DOCKER_HOST"))
    took = time.monotonic() - started
    assert cp.returncode == 0, cp.stderr
    summary = json.loads(cp.stdout)
    assert set(built) <= set(summary["built"]), (sorted(built), summary["built"])
    assert took < BUDGET_S + 5, f"build.py catalog took {took:.1f} s on {len(built)} built images"
    crawl(browser, site)
    screenshot(browser, site, "overview.png")
    for tag in built:
        page = (site / "tags" / f"{tag}.html").read_text()
        assert "Not built." not in page and "MISMATCH" not in page, f"{tag}: {page[:2000]}"


@pytest.mark.docker
def test_a_label_that_lies_is_flagged_on_the_page(browser, built, client, tmp_path: Path) -> None:
    import io

    tag = next(t for t in ("2.6.2-cpu", "3.3.1-cpu-debian12") if t in built)
    liar = "stagecraft-catalog-liar"
    dockerfile = f"FROM {built[tag]['ref']}\nLABEL io.stagecraft.framework.version=\"9.9.9\"\n"
    client.images.build(fileobj=io.BytesIO(dockerfile.encode()), tag=f"{liar}:{tag}", rm=True)
    try:
        site = tmp_path / "site"
        cp = catalog("-o", str(site), "--tag", tag, "--repository", liar, docker_host=os.environ.get("DOCKER_HOST"))
        assert cp.returncode == 0, cp.stderr
        browser.get((site / "tags" / f"{tag}.html").resolve().as_uri())
        row = browser.find_element("xpath", "//th[text()='framework']/..").text
        assert "9.9.9" in row and "MISMATCH" in row and tag.split("-")[0] in row, row
    finally:
        client.images.remove(f"{liar}:{tag}", force=True)
