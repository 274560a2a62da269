"""The report in a real headless browser (Debian's chromium through its chromedriver, driven by selenium): the
page loads without script errors, every table shows its rows, charts and the timeline draw, sorting sorts, and
hostile kernel names stay text. No chromium is a failure, not a skip: .ci/run installs it."""
from __future__ import annotations

import json
import os
import pathlib
import shutil

import pytest

from pyprof.parse import parse_file
from pyprof.report.cli import run

DATA = pathlib.Path(__file__).parents[1] / "data" / "nsys" / "pyprof"
EVIL = "evil<img src=x onerror=window.pwned=1>&amp;"
PAGE_ROWS = 100  # report.js shows this many rows before "Show all"


def _driver():
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.fail("the browser test needs selenium: pip install -e '.[test]'")
    browser = os.environ.get("PYPROF_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    driver = os.environ.get("PYPROF_CHROMEDRIVER") or shutil.which("chromedriver")
    if not browser or not driver:
        pytest.fail("the browser test needs Debian's chromium and chromedriver: "
                    "apt-get install -y chromium chromium-driver (as .ci/run does)")
    opts = webdriver.ChromeOptions()
    opts.binary_location = browser
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1500,1000"):
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    # Both paths given: selenium never looks for (or downloads) a driver or a browser of its own.
    return webdriver.Chrome(service=Service(driver), options=opts)


@pytest.fixture(scope="module")
def browser():
    d = _driver()
    yield d
    d.quit()


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """The report of the ResNet capture, with one kernel renamed to a hostile name."""
    tmp = tmp_path_factory.mktemp("report")
    recs = tmp / "resnet.dict"
    with open(recs, "w") as out:
        parse_file(str(DATA / "resnet.sqlite.xz"), out)
    lines = recs.read_text().splitlines()
    first = json.loads(lines[1])  # the first record (line 0 is parse's header line)
    first["kShortName"] = EVIL
    recs.write_text("\n".join([lines[0], json.dumps(first)] + lines[2:]) + "\n")
    page = tmp / "report.html"
    run([str(recs)], str(page), timeline_events=500)
    return page


def _load(browser, page):
    browser.get(page.as_uri())
    return json.loads(browser.execute_script("return document.getElementById('pyprof-data').textContent"))


def _errors(browser) -> list:
    return [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]


def test_loads_and_renders(browser, report):
    data = _load(browser, report)
    assert _errors(browser) == []
    assert data["tables"], "the report has no tables"
    for t in data["tables"]:
        shown = browser.execute_script(
            f"return document.querySelectorAll('#view-{t['name']} table tbody tr').length")
        assert shown == min(len(t["rows"]), PAGE_ROWS), t["name"]
    charted = [t for t in data["tables"] if t["chart"] and t["rows"]]
    drawn = browser.execute_script("return [...document.querySelectorAll('svg[data-chart]')]"
                                   ".map(s => [s.closest('section').dataset.view, s.querySelectorAll('rect,path').length])")
    assert sorted(v for v, _ in drawn) == sorted(t["name"] for t in charted)
    assert all(n > 0 for _, n in drawn)
    rects = browser.execute_script("return document.querySelectorAll('#timeline rect[data-i]').length")
    assert rects == len(data["timeline"]["ev"]) // 5 > 500  # 500 activities and their launch calls
    path = os.environ.get("PYPROF_SCREENSHOT")
    if path:  # for a person to look at: PYPROF_SCREENSHOT=/tmp/report.png pytest tests/report/test_browser.py
        browser.set_window_size(1500, min(browser.execute_script("return document.body.scrollHeight"), 8000))
        browser.save_screenshot(path)
        browser.set_window_size(1500, 1000)


def test_hostile_names_stay_text(browser, report):
    _load(browser, report)
    assert browser.execute_script("return window.pwned") is None
    assert browser.execute_script("return document.querySelectorAll('main img').length") == 0
    cells = browser.execute_script("return [...document.querySelectorAll('#view-kernels td')].map(td => td.textContent)")
    assert EVIL in cells


def _column(browser, view: str, header: str) -> list:
    return browser.execute_script("""
        const sec = document.getElementById('view-' + arguments[0]);
        const ths = [...sec.querySelectorAll('thead th')];
        const i = ths.findIndex(th => th.textContent === arguments[1]);
        return [...sec.querySelectorAll('tbody tr')].map(tr => tr.children[i].textContent);""", view, header)


def _click(browser, view: str, header: str) -> None:
    browser.execute_script("""[...document.querySelectorAll('#view-' + arguments[0] + ' thead th')]
        .find(th => th.textContent === arguments[1]).click();""", view, header)


def _num(s: str) -> float:
    return float("inf") if s == "na" else float(s.replace(",", ""))


def test_clicking_a_header_sorts(browser, report):
    data = _load(browser, report)
    ops = next(t for t in data["tables"] if t["name"] == "operators")
    header = ops["headers"][ops["columns"].index("calls")]
    before = _column(browser, "operators", header)
    assert [_num(v) for v in before] != sorted((_num(v) for v in before), reverse=True)  # not already sorted
    _click(browser, "operators", header)
    desc = [_num(v) for v in _column(browser, "operators", header)]
    assert desc == sorted(desc, reverse=True)
    _click(browser, "operators", header)
    asc = [_num(v) for v in _column(browser, "operators", header)]
    assert asc == sorted(asc)
    _click(browser, "operators", header)  # third click: the view's own order again
    assert _column(browser, "operators", header) == before
    key = ops["headers"][0]
    _click(browser, "operators", key)
    names = _column(browser, "operators", key)
    assert names == sorted(names, key=str.lower) or names == sorted(names)
    assert _errors(browser) == []


def test_worker_selector(browser, tmp_path):
    ins = []
    for name in ("lenet", "resnet"):
        ins.append(tmp_path / f"{name}.dict")
        with open(ins[-1], "w") as out:
            parse_file(str(DATA / f"{name}.sqlite.xz"), out)
    page = tmp_path / "two.html"
    run([str(p) for p in ins], str(page), timeline_events=100)
    data = _load(browser, page)
    workers = sorted({t["worker"] for t in data["tables"] if t["worker"] is not None})
    assert len(workers) == 2
    options = browser.execute_script("return [...document.querySelectorAll('#worker option')].map(o => o.value)")
    assert sorted(options) == sorted([""] + workers)
    browser.execute_script("const s = document.getElementById('worker'); s.value = arguments[0];"
                           "s.dispatchEvent(new Event('change'));", workers[0])
    ops = next(t for t in data["tables"] if t["name"] == "operators" and t["worker"] == workers[0])
    assert browser.execute_script("return document.querySelector('#view-operators h2 .worker').textContent") == \
        f"worker {workers[0]}"
    assert browser.execute_script("return document.querySelectorAll('#view-operators tbody tr').length") == \
        min(len(ops["rows"]), PAGE_ROWS)
    assert _errors(browser) == []
