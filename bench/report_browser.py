"""How the report page responds in a real browser (Debian's chromium, headless, through selenium), against a
baseline measured in the same page: the time the browser takes to parse the page's embedded JSON alone.

Times, for the given page:
- baseline: JSON.parse of the page's data (what any page holding these numbers must do);
- load: from navigation to the page drawn (the headline, the views, the timeline, the first rows of the
  activities table);
- sort: a click on the activities table's Duration header (every activity sorted);
- filter: text typed into the filter box (every table and every activity narrowed);
- drill: a click on the first op of the operators table (its activities selected and broken down);
- scroll: the activities table scrolled to its last row.
Prints one line per figure and each as a ratio to the baseline.

    python bench/report_browser.py REPORT.html [--filter TEXT]
    pyprof report records.dict -o /tmp/r.html && python bench/report_browser.py /tmp/r.html
"""
from __future__ import annotations

import argparse
import pathlib
import shutil
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("page", help="a page written by pyprof report")
    ap.add_argument("--filter", default="linear", help="text typed into the filter box (default: linear)")
    args = ap.parse_args()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,900"):
        opts.add_argument(a)
    d = webdriver.Chrome(service=Service(shutil.which("chromedriver") or "/usr/bin/chromedriver"), options=opts)
    d.set_script_timeout(300)
    try:
        t = time.perf_counter()
        d.get(pathlib.Path(args.page).resolve().as_uri())
        load_s = time.perf_counter() - t
        base_s = d.execute_script("const t = performance.now();"
                                  "JSON.parse(document.getElementById('pyprof-data').textContent);"
                                  "return (performance.now() - t) / 1000;")
        n = d.execute_script("return window.pyprofReport ? document.querySelector('#view-activities h2').textContent : ''")

        def timed(script: str) -> float:
            # the script's work and the frame it causes: a promise resolved after the next animation frame
            return d.execute_async_script(
                "const done = arguments[arguments.length - 1]; const t = performance.now();" + script +
                ";requestAnimationFrame(() => setTimeout(() => done((performance.now() - t) / 1000), 0));")

        sort_s = timed("document.querySelector('#view-activities th[data-col=dur_us]').click()")
        drill_s = timed("document.querySelector('#view-operators tbody button.drill').click()")
        timed("document.querySelector('#drill .crumb').click()")
        filter_s = d.execute_async_script(
            "const done = arguments[arguments.length - 1]; const f = document.getElementById('filter');"
            "const t = performance.now(); f.value = arguments[0]; f.dispatchEvent(new Event('input'));"
            # the box waits 150 ms for more typing before it filters: that wait is not the page's work
            "setTimeout(() => requestAnimationFrame(() => setTimeout(() => done((performance.now() - t) / 1000 - 0.15),"
            " 0)), 150);", args.filter)
        scroll_s = timed("const s = document.querySelector('.vscroll'); s.scrollTop = s.scrollHeight")
        print(f"page: {args.page}, {pathlib.Path(args.page).stat().st_size / 1e6:.0f} MB; {n}")
        print(f"baseline (JSON.parse of the page's data): {base_s:.3f} s")
        for name, s in (("load", load_s), ("sort every activity", sort_s), ("drill into the top op", drill_s),
                        (f"filter '{args.filter}'", filter_s), ("scroll to the last activity", scroll_s)):
            print(f"{name}: {s:.3f} s, {s / base_s if base_s else float('nan'):.2f}x the baseline")
    finally:
        d.quit()


if __name__ == "__main__":
    main()
