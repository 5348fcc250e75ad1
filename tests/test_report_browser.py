"""The HTML report in a real headless Chromium (issue 24, item 7): it loads with no console
error and fetches nothing, a point's tooltip names its op group with that group's numbers,
the ops table sorts by a column, and a screenshot shows it.

Chromium and its driver come from Debian's ``chromium`` and ``chromium-driver`` packages
(``.ci/run`` installs them). Where neither can be found the test skips and says so; with
``ROOFLINE_REQUIRE_BROWSER=1`` (set by ``.ci/run``) a missing browser is a failure.
``ROOFLINE_REPORT_SCREENSHOT=path`` also saves the screenshot there (the docs' copy).
"""

from __future__ import annotations

import os
import re
import shutil
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

import roofline
from roofline._si import si
from roofline.presentation.groups import grouped
from roofline.presentation.html import write_html
from roofline.presentation.tables import seconds

pytestmark = pytest.mark.slow

_BROWSERS = ("chromium", "chromium-browser", "google-chrome", "chrome")


def _browser() -> tuple[str, str] | str:
    """(browser, driver) paths, or why there is none."""
    browser = next((p for p in map(shutil.which, _BROWSERS) if p), None)
    driver = shutil.which("chromedriver")
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[test]')"
    if browser is None or driver is None:
        return (f"no headless Chromium here (found browser: {browser}, chromedriver: "
                f"{driver}); on Debian: apt-get install chromium chromium-driver")
    return browser, driver


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    found = _browser()
    if isinstance(found, str):
        if os.environ.get("ROOFLINE_REQUIRE_BROWSER") == "1":
            pytest.fail(found)
        pytest.skip(found)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1300,1100"):
        options.add_argument(arg)
    # A profile under pytest's temporary folders, which pytest prunes; left to itself
    # chromedriver makes one in /tmp per run and leaves it there.
    options.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium')}")
    options.binary_location = found[0]
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    d = webdriver.Chrome(service=Service(found[1]), options=options)
    try:
        yield d
    finally:
        d.quit()


class _Net(torch.nn.Module):
    """Matmuls, a norm and a softmax: points on both sides of the ridge."""

    def __init__(self) -> None:
        super().__init__()
        self.up, self.down = torch.nn.Linear(512, 2048), torch.nn.Linear(2048, 512)
        self.norm = torch.nn.LayerNorm(512)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.down(torch.relu(self.up(x)))).softmax(-1).sum()


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[roofline.Comparison, Path]:
    model = _Net()
    t = roofline.trace(model, torch.randn(256, 512), train=True,
                       optimizer=torch.optim.AdamW(model.parameters()), fake=True)
    c = roofline.compare(t, "a100", "h100")
    path = tmp_path_factory.mktemp("report") / "report.html"
    write_html(str(path), c)
    return c, path


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def test_report_renders_hovers_sorts_and_screenshots(
        driver: Any, report: tuple[roofline.Comparison, Path], tmp_path: Path) -> None:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    c, path = report
    html = path.read_text(encoding="utf-8")
    # self-contained: nothing to fetch at view time
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html)
    driver.get(path.as_uri())
    errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == []
    assert driver.execute_script(
        "return performance.getEntriesByType('resource').length") == 0

    # every point's tooltip is an op group: its label and that group's numbers on the
    # source device (grouped() sums the trace's op records). Points may overlap, and the
    # one on top answers, so each hover starts away from the chart.
    groups: dict[str, list[Any]] = {}
    for g in grouped(c.src).values():
        groups.setdefault(g.label, []).append(g)
    points = driver.find_elements(By.CSS_SELECTOR, "#points .point")
    assert len(points) >= 3
    tip = driver.find_element(By.ID, "tip")
    title = driver.find_element(By.TAG_NAME, "h1")
    seen = set()
    for point in points:
        ActionChains(driver).move_to_element(title).perform()
        assert not tip.is_displayed()
        ActionChains(driver).move_to_element(point).perform()
        assert tip.is_displayed()
        label, *fields = tip.text.splitlines()
        said = dict(f.split(": ", 1) for f in fields)
        assert any(said == {"calls": str(g.count), "FLOPs": si(g.flops, "FLOP"),
                            "bytes": si(g.bytes, "B"), "FLOP/B": f"{g.flops / g.bytes:.3g}",
                            "time": seconds(g.seconds), "share": f"{g.seconds / c.src.seconds:.1%}",
                            "bound": g.bound} for g in groups[label]), (label, said)
        seen.add(label)
    assert len(seen) >= len(points) // 2
    assert {"addmm", "mm", "native_layer_norm", "_softmax"} <= {s.split()[0] for s in seen}

    # the ops table sorts by the column clicked, descending first, then ascending
    head = driver.find_elements(By.CSS_SELECTOR, "#ops th")
    col = [h.text for h in head].index("bytes")

    def column() -> list[float]:
        return [float(r.find_elements(By.TAG_NAME, "td")[col].get_attribute("data-v"))
                for r in driver.find_elements(By.CSS_SELECTOR, "#ops tbody tr")]

    head[col].click()
    assert column() == sorted(column(), reverse=True)
    head[col].click()
    assert column() == sorted(column())
    assert len(column()) == min(len(groups), 200)

    # a screenshot with a tooltip showing
    ActionChains(driver).move_to_element(points[0]).perform()
    shot = driver.get_screenshot_as_png()
    assert _png_size(shot) == tuple(driver.execute_script(
        "return [window.innerWidth * devicePixelRatio, window.innerHeight * devicePixelRatio]"))
    (tmp_path / "report.png").write_bytes(shot)
    if os.environ.get("ROOFLINE_REPORT_SCREENSHOT"):
        Path(os.environ["ROOFLINE_REPORT_SCREENSHOT"]).write_bytes(shot)
