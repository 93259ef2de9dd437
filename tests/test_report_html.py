"""report.html in a real headless Chromium (Debian's chromium + chromium-driver through selenium):
the page of a small store analysed by `depthwidth analyze` loads with no console error, every
figure renders at a non-zero size, the runs table sorts and filters, and clicking a run draws its
shape's learning curves. A screenshot is saved as a test artifact (the test prints where)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pandas as pd
import pytest
from browser import find_browser
from helpers import cli
from test_analysis_report import smoke_store

from analysis.reporting import html as page

ARTIFACTS = Path(
    os.environ.get("DEPTHWIDTH_ARTIFACTS", Path(__file__).resolve().parent.parent / ".artifacts")
)


@pytest.fixture(scope="module")
def analysed(tmp_path_factory):
    """A small store (4 depths x 3 widths, two seeds at one shape, one diverged and one failed
    run), analysed through the real CLI."""
    store = smoke_store(tmp_path_factory.mktemp("html") / "store")
    runs = pd.read_parquet(store / "runs.parquet")
    curves = pd.read_parquet(store / "curves.parquet")
    extra = runs[(runs["depth"] == 2) & (runs["width"] == 32)].copy()
    extra["trial_id"], extra["seed"] = "t_extra_seed", 1
    extra_curve = curves[curves["trial_id"] == runs.loc[extra.index[0], "trial_id"]].assign(
        trial_id="t_extra_seed"
    )
    runs = pd.concat([runs, extra], ignore_index=True)
    runs["lr"] = 1e-3
    runs.loc[runs["depth"] == 4, "lr"] = 3e-3
    runs.loc[0, "status"], runs.loc[1, "status"] = "diverged", "failed"
    runs.to_parquet(store / "runs.parquet")
    pd.concat([curves, extra_curve], ignore_index=True).to_parquet(store / "curves.parquet")
    res = cli("analyze", store, "--bootstrap", 20)
    assert res.returncode == 0, res.stdout + res.stderr
    return store, store / "analysis" / "report.html"


@pytest.fixture
def chromium():
    """The browser helper (tests/browser.py) once Chromium, its driver and selenium are here; CI
    must have them."""
    if find_browser() is None:
        if os.environ.get("CI"):
            pytest.fail("CI must run the browser test: chromium and chromedriver are missing")
        pytest.skip("chromium and chromedriver are not installed (apt-get install chromium chromium-driver)")
    pytest.importorskip("selenium")
    import browser

    return browser


def test_page_is_one_self_contained_file(analysed):
    store, html_path = analysed
    text = html_path.read_text(encoding="utf-8")
    report = json.loads((store / "analysis" / "report.json").read_text())
    # nothing is fetched: no external script, stylesheet, image or font
    assert not re.search(r"""(src|href)=["'](https?:|//)""", text)
    assert "@import" not in text and "url(http" not in text
    for name in report["figures"]["written"]:
        assert f'id="fig-{name}"' in text
    assert text.count('src="data:image/png;base64,') == len(list((store / "analysis").glob("*.png")))
    data = json.loads(
        re.search(r'<script type="application/json" id="data">(.*?)</script>', text, re.S)
        .group(1)
        .replace("<\\/", "</")
    )
    assert data["n_runs"] == 13 and set(data["curves"]) == set(data["runs"]["trial_id"])
    assert {"depth", "width", "n_params", "final_val_loss", "status", "lr"} <= set(data["columns"])
    # the verdict and the fit tables are report.md's own
    assert "threshold" in text and '<table class="fit">' in text
    assert "Threshold base b in L_th" in text


def test_downsampling_keeps_first_and_last_and_says_so():
    idx = page.downsample(50, 24)
    assert idx[0] == 0 and idx[-1] == 49 and len(idx) <= 26 and list(idx) == sorted(set(idx))
    assert list(page.downsample(10, 24)) == list(range(10))
    runs = pd.DataFrame(
        {"trial_id": ["a"], "depth": [1], "width": [8], "final_val_loss": [1.0], "status": ["ok"]}
    )
    curves = pd.DataFrame({"trial_id": "a", "step": range(1, 51), "val_loss": 1.0, "train_loss": 1.0})
    data = page.page_data(runs, curves)
    steps = data["curves"]["a"][0]
    assert steps[0] == 1 and steps[-1] == 50 and len(steps) <= 26 and data["max_evals"] == 50
    html_text = page.render_page({"n_runs": 1}, "# t\n", [], data)
    assert "at most 24 points per run" in html_text and "of up to 50 evaluations" in html_text


def test_page_in_headless_chromium(analysed, chromium):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    store, html_path = analysed
    runs = pd.read_parquet(store / "runs.parquet")
    driver, profile = chromium.start()
    try:
        driver.get(html_path.as_uri())
        assert driver.execute_script("return window.reportReady === true")
        errors = [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]
        assert errors == [], errors

        imgs = driver.find_elements(By.CSS_SELECTOR, "#figures figure img")
        assert len(imgs) == len(list((store / "analysis").glob("*.png"))) >= 4
        for img in imgs:
            size = driver.execute_script(
                "const r = arguments[0].getBoundingClientRect();"
                "return [arguments[0].complete, arguments[0].naturalWidth, r.width, r.height];",
                img,
            )
            assert size[0] and size[1] > 0 and size[2] > 0 and size[3] > 0, (img.get_attribute("alt"), size)

        def column(name: str) -> list[str]:
            i = [th.text.strip() for th in driver.find_elements(By.CSS_SELECTOR, "#runs-table th")].index(
                name
            )
            return [
                tr.find_elements(By.TAG_NAME, "td")[i].text
                for tr in driver.find_elements(By.CSS_SELECTOR, "#runs-table tbody tr")
            ]

        assert len(column("depth")) == len(runs) == 13
        header = driver.find_element(By.CSS_SELECTOR, '#runs-table th[data-col="final_val_loss"]')
        header.click()
        shown = [float(v) for v in column("final_val_loss")]
        assert shown == sorted(shown) and "asc" in header.get_attribute("class")
        header.click()
        shown = [float(v) for v in column("final_val_loss")]
        assert shown == sorted(shown, reverse=True)
        assert shown[0] == pytest.approx(runs["final_val_loss"].max(), rel=1e-4)

        box = driver.find_element(By.ID, "filter")
        box.send_keys("depth:2")
        assert set(column("depth")) == {"2"} and len(column("depth")) == int((runs["depth"] == 2).sum())
        assert driver.find_element(By.ID, "count").text == f"{(runs['depth'] == 2).sum()} of 13 runs"
        box.clear()
        box.send_keys("status:failed")
        assert column("status") == ["failed"]
        driver.execute_script("arguments[0].value = ''; arguments[0].dispatchEvent(new Event('input'));", box)

        # click the run at depth 2, width 32: its shape has two runs (two seeds), so two curves
        def click_run(d: str, w: str) -> None:
            rows = driver.find_elements(By.CSS_SELECTOR, "#runs-table tbody tr")
            depth, width = column("depth"), column("width")
            rows[next(i for i in range(len(rows)) if depth[i] == d and width[i] == w)].click()

        click_run("2", "32")
        shape = Select(driver.find_element(By.ID, "shape")).first_selected_option.get_attribute("value")
        assert shape == "transformer depth 2 × width 32"
        val = driver.find_elements(By.CSS_SELECTOR, "#chart svg polyline.val")
        assert len(val) == 2
        for line in val:
            assert len(line.get_attribute("points").split()) == 7  # every point of 7-point curves
        box_size = driver.execute_script(
            "const r = document.querySelector('#chart svg').getBoundingClientRect(); return [r.width, r.height];"
        )
        assert box_size[0] > 200 and box_size[1] > 100
        Select(driver.find_element(By.ID, "shape")).select_by_index(0)
        assert len(driver.find_elements(By.CSS_SELECTOR, "#chart svg polyline.val")) == 1
        click_run("2", "32")
        errors = [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]
        assert errors == [], errors

        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        driver.execute_script("window.scrollTo(0, 0)")
        top = ARTIFACTS / "report_html_top.png"
        driver.save_screenshot(str(top))
        driver.execute_script("document.getElementById('runs').scrollIntoView()")
        bottom = ARTIFACTS / "report_html_runs.png"
        driver.save_screenshot(str(bottom))
        assert top.stat().st_size > 10_000 and bottom.stat().st_size > 10_000
        print(f"\nscreenshots of report.html: {top} and {bottom}")
    finally:
        chromium.stop(driver, profile)


def test_figures_open_full_size_in_headless_chromium(analysed, chromium):
    """Each figure links to its PNG beside the page and opens in the page's viewer at its natural
    size (a browser refuses to open the inline data URI as a page); a figure at least twice as
    wide as high spans the gallery; the link itself opens the PNG file."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    store, html_path = analysed
    sizes = {p.stem: page.png_size(p.read_bytes()) for p in (store / "analysis").glob("*.png")}
    wide = {n for n, (w, h) in sizes.items() if w >= page.WIDE * h}
    assert wide and wide != set(sizes), sizes  # this store draws both kinds
    driver, profile = chromium.start("1280,900")
    try:
        driver.get(html_path.as_uri())
        gallery = driver.execute_script("return document.querySelector('#figures .gallery').clientWidth")
        for name, (w, _h) in sizes.items():
            link = driver.find_element(By.CSS_SELECTOR, f"#fig-{name} a.full")
            assert link.get_attribute("href") == (html_path.parent / f"{name}.png").as_uri()
            shown = driver.execute_script("return arguments[0].getBoundingClientRect().width", link)
            assert (shown >= 0.95 * gallery) == (name in wide), (name, shown, gallery)
            driver.execute_script("arguments[0].scrollIntoView()", link)
            link.click()
            viewer = driver.find_element(By.ID, "viewer")
            assert viewer.is_displayed()
            natural, width = driver.execute_script(
                "const i = document.getElementById('viewer-img'); return [i.naturalWidth, i.getBoundingClientRect().width]"
            )
            assert natural == w and width == pytest.approx(w, abs=1), (name, natural, width)  # full size
            assert driver.find_element(By.ID, "viewer-name").text == name.replace("_", " ")
            driver.find_element(By.ID, "viewer-fit").click()  # fitted: the whole figure in the window
            fitted = driver.execute_script(
                "return document.getElementById('viewer-img').getBoundingClientRect().width"
            )
            assert fitted <= min(w, 1280)
            driver.find_element(By.TAG_NAME, "body").send_keys(Keys.ESCAPE)
            assert not viewer.is_displayed()
        errors = [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]
        assert errors == [], errors
        # the viewer's link opens the PNG file itself, at its own size
        name = sorted(wide)[0]
        driver.find_element(By.CSS_SELECTOR, f"#fig-{name} a.full").click()
        driver.find_element(By.ID, "viewer-file").click()
        assert driver.current_url == (html_path.parent / f"{name}.png").as_uri()
        assert driver.execute_script("return document.images[0].naturalWidth") == sizes[name][0]
    finally:
        chromium.stop(driver, profile)


def _expected_structure(md: str) -> tuple[list[str], int, list[tuple[bool, list[str]]]]:
    """From report.md by its lines: the section headings the page's Fits section shows, the
    number of tables there, and each list as (whether it directly follows a paragraph line, with
    no blank line between as CommonMark allows; its items)."""
    headings, tables, lists, section = [], 0, [], ""
    lines = md.splitlines()
    for i, line in enumerate(lines):
        prev = lines[i - 1] if i else ""
        if line.startswith("## "):
            section = line[3:].strip()
            if section.lower() != "figures" and "what the data say" not in section.lower():
                headings.append(section.replace("`", ""))
        elif section.lower() == "figures":
            continue
        elif line.startswith("|") and not prev.startswith("|"):
            tables += 1
        elif line.startswith("- ") and not prev.startswith("- "):
            items = [line]
            for nxt in lines[i + 1 :]:
                if not nxt.startswith("- "):
                    break
                items.append(nxt)
            direct = bool(prev.strip()) and not prev.startswith(("|", "#"))
            lists.append((direct, [re.sub(r"[`*]", "", it[2:]).strip() for it in items]))
    return headings, tables, lists


def test_page_structure_in_headless_chromium(analysed, chromium):
    """The page's structure as a browser builds it: report.md's lists as <ul>/<li> (also a list
    straight after a paragraph), its tables as <table>, its sections under <h2>/<h3>."""
    from selenium.webdriver.common.by import By

    store, html_path = analysed
    headings, n_tables, lists = _expected_structure((store / "analysis" / "report.md").read_text())
    assert any(direct for direct, _ in lists), "this store's report.md has a list straight after a paragraph"
    driver, profile = chromium.start()
    try:
        driver.get(html_path.as_uri())
        sections = [h.text for h in driver.find_elements(By.CSS_SELECTOR, "section > h2")]
        assert sections == ["What the data say about L_th", "Figures", "Fits", "Runs", "Learning curves"]
        assert [h.text for h in driver.find_elements(By.CSS_SELECTOR, "#fits h3")] == headings
        tables = driver.find_elements(By.CSS_SELECTOR, "#fits div.scroll > table.fit")
        assert len(tables) == n_tables >= 2
        for t in tables:
            assert t.find_elements(By.CSS_SELECTOR, "thead th") and t.find_elements(
                By.CSS_SELECTOR, "tbody tr"
            )
        shown = driver.execute_script(
            "return [...document.querySelectorAll('#fits ul')].map(u => ["
            "u.previousElementSibling && u.previousElementSibling.tagName,"
            "[...u.children].map(li => li.tagName + ':' + li.textContent.trim())])"
        )
        assert all(li.startswith("LI:") for _, items in shown for li in items)
        assert [[li[3:] for li in items] for _, items in shown] == [items for _, items in lists]
        for (prev, _), (direct, items) in zip(shown, lists):
            assert prev == "P" or not direct, items[0]  # the paragraph it follows ends before it
        # no item is run into a paragraph's text
        paragraphs = [p.text for p in driver.find_elements(By.CSS_SELECTOR, "#fits p")]
        assert not any(f"- {items[0][:30]}" in p for p in paragraphs for _, items in lists)
    finally:
        chromium.stop(driver, profile)


def test_markdown_lists_after_a_paragraph_tables_and_escaping():
    """The converter alone: CommonMark lists (straight after a paragraph too), tables in their
    scroll box, headings one level down, images and the Figures section left out, raw HTML escaped."""
    md = (
        "# title\n\n## What the data say about L_th\n\nThe **verdict** here.\n\n## Input\n\n"
        "Read as the store layout.\n- first `note`\n- second <b>note</b>\n\n"
        "| a | b |\n|---|---|\n| 1 | 2 |\n\n## Figures\n\n![x](x.png)\n\nNot drawn: y.\n"
    )
    verdict, body = page.markdown_html(md)
    assert verdict == "The <strong>verdict</strong> here."
    assert "<h3>Input</h3>" in body and "title" not in body and "Figures" not in body
    assert "<p>Read as the store layout.</p>\n<ul>\n<li>first <code>note</code></li>" in body
    assert "<li>second &lt;b&gt;note&lt;/b&gt;</li>" in body
    assert '<div class="scroll"><table class="fit">' in body and "<td>2</td>" in body
    assert "<img" not in body and "Not drawn" not in body


def test_plot_rewrites_the_page(analysed):
    store, html_path = analysed
    html_path.unlink()
    res = cli("plot", store)
    assert res.returncode == 0, res.stdout + res.stderr
    text = html_path.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>") and 'id="runs-table"' in text
