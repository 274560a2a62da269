"""The report in a real headless browser (Debian's chromium through its chromedriver, driven by selenium): the
page loads without script errors, every table shows its rows, charts and the timeline draw, sorting sorts, and
hostile kernel names stay text. No chromium is a failure, not a skip: .ci/run installs it."""
from __future__ import annotations

import json
import os
import pathlib
import shutil

import pytest
from parse_output import records_of

from pyprof.parse import parse_file
from pyprof.report.cli import run

DATA = pathlib.Path(__file__).parents[1] / "data" / "nsys" / "pyprof"
EVIL = "evil<img src=x onerror=window.pwned=1>&amp;"
PAGE_ROWS = 100  # report.js shows this many rows before "Show all"
WIDTHS = (1024, 1280, 1920)  # the window widths the page must fit


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
    # 500 activities, their 500 launch calls and the CPU ranges around those
    assert rects == len(data["timeline"]["ev"]) // 6 > 1000
    path = os.environ.get("PYPROF_SCREENSHOT")
    if path:  # for a person to look at: PYPROF_SCREENSHOT=/tmp/report.png pytest tests/report/test_browser.py
        for width in WIDTHS:  # loaded at each width, as a reader opens it (charts are drawn to the width)
            browser.set_window_size(width, 1000)
            browser.get(report.as_uri())
            browser.set_window_size(width, min(browser.execute_script("return document.body.scrollHeight"), 9000))
            browser.execute_script("return new Promise(r => setTimeout(r, 400))")  # the redraw after a resize
            browser.save_screenshot(path.replace(".png", f"-{width}.png"))
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


# ---- layout, filter, drill-down, every activity (issue 15)


@pytest.fixture(scope="module")
def records(report):
    """The records behind the report (the hostile name included), as the page's numbers must match them."""
    lines = (report.parent / "resnet.dict").read_text().splitlines()
    return [json.loads(x) for x in records_of(lines)]


def _overflow(browser) -> list:
    """What sticks out: the page wider than the window, a table or chart wider than its box."""
    return browser.execute_script("""
        const out = [];
        if (document.documentElement.scrollWidth > window.innerWidth) out.push(['page', document.documentElement.scrollWidth]);
        document.querySelectorAll('.tablewrap, .vscroll, section').forEach(e => {
          if (e.scrollWidth > e.clientWidth + 1) out.push([e.closest('section').id, e.scrollWidth, e.clientWidth]);
        });
        document.querySelectorAll('main svg').forEach(s => {
          const sec = s.closest('section');
          if (s.getBoundingClientRect().right > sec.getBoundingClientRect().right + 1) out.push(['svg in ' + sec.id]);
        });
        return out;""")


@pytest.mark.parametrize("width", WIDTHS)
def test_fits_the_window(browser, report, width):
    browser.set_window_size(width, 1000)
    try:
        _load(browser, report)
        assert _overflow(browser) == []
        # every number column of every table is inside the window (the last header's right edge)
        right = browser.execute_script("""return Math.max(...[...document.querySelectorAll('main table')]
            .filter(t => t.offsetParent).map(t => { const th = t.querySelector('thead th:last-child');
            return th.getBoundingClientRect().right; }))""")
        assert right <= width
        assert _errors(browser) == []
    finally:
        browser.set_window_size(1500, 1000)


def _op_label(d: dict) -> str:
    # The op a record is charged to (docs/views.md, operators): a backward kernel its forward op's, "(bprop)"
    if d["kind"] != "kernel":
        return d["kind"]
    op = (d.get("op") or ["na"])[0]
    if d.get("dir") == "bprop":
        fwd = d.get("fwd") or {}
        fop = fwd.get("op")
        return f"{(fop if isinstance(fop, str) else fop[0]) if fop else op} (bprop)"
    return op


def _type_filter(browser, text: str) -> None:
    browser.execute_script("const f = document.getElementById('filter'); f.value = arguments[0];"
                           "f.dispatchEvent(new Event('input'));", text)
    browser.execute_script("return new Promise(r => setTimeout(r, 400))")  # the box waits 150 ms for typing


def test_filter_narrows_every_table(browser, report, records):
    _load(browser, report)
    _type_filter(browser, "batch_norm")
    # op names are the only field with "batch_norm" in this capture (cuDNN's kernels say "batchnorm", the
    # layers "bn1", the lines resnet.py): the activities that match are batch_norm's, forward and backward
    expected = sum(1 for d in records if _op_label(d).startswith("batch_norm"))
    assert expected > 100
    info = browser.execute_script("return document.getElementById('activities-info').textContent")
    assert info.startswith(f"{expected:,} of {len(records):,} activities")
    ops = _column(browser, "operators", "Op")
    assert sorted(ops) == ["batch_norm", "batch_norm (bprop)"]
    for view in ("operators_shapes", "lines", "kernels"):
        shown = browser.execute_script(f"return [...document.querySelectorAll('#view-{view} tbody tr')]"
                                       ".map(tr => tr.textContent.toLowerCase())")
        for row in shown:
            assert "batch_norm" in row or view in ("lines", "kernels") and row == "", (view, row)
    _type_filter(browser, "")
    assert browser.execute_script("return document.querySelectorAll('#view-operators tbody tr').length") > 2
    assert _errors(browser) == []


def test_drill_down_op_to_kernels_to_lines_and_back(browser, report, records):
    data = _load(browser, report)
    ops = next(t for t in data["tables"] if t["name"] == "operators")
    top = ops["rows"][0]
    op, kernels = top[ops["columns"].index("op")], top[ops["columns"].index("kernels")]
    browser.execute_script("document.querySelector('#view-operators tbody tr button.drill').click()")
    assert browser.execute_script("return document.getElementById('drill').style.display") == ""
    summary = browser.execute_script("return document.querySelector('#drill .drill-sum').textContent")
    mine = [d for d in records if _op_label(d) == op]
    assert len(mine) == kernels  # the view's count and a recount from the records
    assert summary.startswith(f"{len(mine):,} GPU activities, ")
    # the op's kernels, most time first; their counts add up to the op's
    parts = browser.execute_script("""return [...document.querySelectorAll('#drill .drill-part[data-dim=kernel] tbody tr')]
        .map(tr => [tr.children[0].textContent, +tr.children[1].textContent.replace(/,/g, '')])""")
    assert sum(n for _, n in parts) == len(mine)
    # one step further: its first kernel, then that kernel's lines
    browser.execute_script("document.querySelector('#drill .drill-part[data-dim=kernel] button.drill').click()")
    crumbs = browser.execute_script("return [...document.querySelectorAll('#drill .crumb')].map(b => b.textContent)")
    assert len(crumbs) == 3 and crumbs[1] == f"Op: {op}" and crumbs[2].startswith("Kernel: ")
    n2 = int(browser.execute_script("return document.querySelector('#drill .drill-sum').textContent")
             .split(" ")[0].replace(",", ""))
    assert n2 == parts[0][1]
    lines = browser.execute_script("return document.querySelectorAll('#drill .drill-part[data-dim=line] tbody tr').length")
    assert lines >= 1
    info = browser.execute_script("return document.getElementById('activities-info').textContent")
    assert info.startswith(f"{n2:,} of {len(records):,} activities")
    # back: the op alone, then everything
    browser.execute_script("document.querySelectorAll('#drill .crumb')[1].click()")
    assert browser.execute_script("return document.querySelector('#drill .drill-sum').textContent").startswith(f"{len(mine):,} ")
    browser.execute_script("document.querySelector('#drill .crumb').click()")
    assert browser.execute_script("return document.getElementById('drill').style.display") == "none"
    assert _errors(browser) == []


def test_every_activity_is_in_the_table(browser, report, records):
    data = _load(browser, report)
    assert data["activities"]["n"] == len(records) == 784
    drawn = browser.execute_script("return document.querySelectorAll('.vscroll tbody tr[data-i]').length")
    assert 0 < drawn < len(records)  # only the rows in view are in the page
    browser.execute_script("const s = document.querySelector('.vscroll'); s.scrollTop = s.scrollHeight;")
    browser.execute_script("return new Promise(r => requestAnimationFrame(() => setTimeout(r, 50)))")
    last = browser.execute_script("const r = [...document.querySelectorAll('.vscroll tbody tr[data-i]')];"
                                  "return +r[r.length - 1].dataset.i")
    assert last == len(records) - 1
    # longest first on the first click on Duration: the longest record's duration, in us to 0.1
    browser.execute_script("document.querySelector('#view-activities th[data-col=dur_us]').click()")
    first = browser.execute_script("return document.querySelector('.vscroll tbody tr[data-i]').children[1].textContent")
    assert first == f"{max(d['kDuration'] for d in records) / 1000:,.1f}"
    assert _errors(browser) == []


def test_headline_agrees_with_the_records(browser, report, records):
    data = _load(browser, report)
    h = data["headline"]
    assert h["activities"] == len(records)
    assert h["gpu_ms"] == pytest.approx(sum(d["kDuration"] for d in records) / 1e6, abs=1e-4)
    cards = dict(browser.execute_script(
        "return [...document.querySelectorAll('#headline .card')].map(c => [c.querySelector('.label').textContent, "
        "c.querySelector('.value').textContent])"))
    assert cards["GPU time"] == f"{h['gpu_ms']:,.3f} ms"
    # no program line in these records (a capture made without pyprof run): the program's step is not claimed
    assert h["program_step_ms"] is None and cards["Program step"] == "na"
    ov = next(t for t in data["tables"] if t["name"] == "overview")
    mean = ov["rows"][-1] if len(ov["rows"]) > 1 else ov["rows"][0]
    assert h["step_ms"] == mean[ov["columns"].index("span_ms")]
    assert len(h["top_ops"]) == 3 and h["top_ops"][0]["label"] == data["tables"][1]["rows"][0][0]
    assert browser.execute_script("return document.querySelectorAll('#headline button.drill').length") >= 3


def test_timeline_zooms_and_its_tip_stays_on_screen(browser, report):
    _load(browser, report)
    before = browser.execute_script("return document.getElementById('tl-window').textContent")
    browser.execute_script("document.getElementById('tl-zoom-in').click()")
    browser.execute_script("return new Promise(r => requestAnimationFrame(() => setTimeout(r, 50)))")
    after = browser.execute_script("return document.getElementById('tl-window').textContent")
    assert after != before
    # hover the right-most event: the tip must not run off the window
    tip = browser.execute_script("""
        const rs = [...document.querySelectorAll('#timeline rect[data-i]')];
        const r = rs.reduce((a, b) => a.getBoundingClientRect().right > b.getBoundingClientRect().right ? a : b);
        r.scrollIntoView({block: 'center'});
        const b = r.getBoundingClientRect();
        r.dispatchEvent(new MouseEvent('mousemove', {bubbles: true, clientX: b.right - 1, clientY: b.top + 2}));
        const t = document.getElementById('tip').getBoundingClientRect();
        return [t.left, t.right, t.top, t.bottom, window.innerWidth, window.innerHeight, document.getElementById('tip').style.display];""")
    left, right, top, bottom, w, hgt, shown = tip
    assert shown == "block" and left >= 0 and right <= w and top >= 0 and bottom <= hgt
    assert _errors(browser) == []
