"""A Snakemake report.html read as a person reads it: in headless Chromium (Debian's
`chromium` and `chromium-driver`), driven by selenium. Every category and subcategory of
the side bar is opened, every entry of its table viewed with its eye button; what each
showed is kept with the bytes behind it, with the page's console messages and screenshots.

The report is a React app (snakemake/report/html_reporter/template/components): the side
bar is `#app nav`, the view on its right the app's last child; an entry's eye button shows
an image or an iframe there, or is a download link (`download` attribute) for other types.
"""

from __future__ import annotations

import base64
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlparse

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
SIDEBAR = "#app > div > nav"
VIEW = "#app > div > div:last-child"
ROWS = f"{SIDEBAR} table tbody tr"


def available() -> str | None:
    """Why the browser cannot run here, or None."""
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not Path(p).exists()]
    if missing:
        return f"no {' and '.join(missing)} (apt-get install chromium chromium-driver)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "no selenium (pip install selenium)"
    return None


@dataclass
class Entry:
    """One entry of a subcategory's table, as its eye button showed it."""

    category: str
    subcategory: str
    labels: list[str]
    shown_as: str  # "img", "iframe" or "download"
    filename: str  # the name of the file behind it
    data: bytes
    rendered: bool  # an image with pixels; a frame with a document; a link (nothing to render)


@dataclass
class Visit:
    entries: list[Entry] = field(default_factory=list)
    console: list[dict] = field(default_factory=list)
    screenshots: list[Path] = field(default_factory=list)

    def errors(self) -> list[dict]:
        return [m for m in self.console if m["level"] == "SEVERE"]


def content(uri: str) -> tuple[str, bytes]:
    """(file name, bytes) behind an entry's URI: a data URI of report.html
    (data:MIME;charset=..;filename=NAME;base64,DATA), or a file of report.zip's data/ folder
    (the browser resolves the relative path to a file:// URL)."""
    if uri.startswith("file:"):
        path = Path(unquote(urlparse(uri).path))
        return path.name, path.read_bytes() if path.is_file() else b""
    head, _, payload = uri.partition(",")
    name = re.search(r";filename=([^;]+)", head)
    data = base64.b64decode(payload) if head.endswith(";base64") else unquote(payload).encode()
    return (name.group(1) if name else ""), data


def wait_for(condition, timeout: float):
    """condition()'s first true value, polled every 50 ms; its last value after timeout s."""
    end = time.monotonic() + timeout
    while True:
        value = condition()
        if value or time.monotonic() > end:
            return value
        time.sleep(0.05)


def headless_chromium(width: int, height: int, network_log: bool = False):
    """A selenium driver of Debian's headless Chromium that keeps the console log (and, with
    network_log, the performance log: every request the page makes)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                f"--window-size={width},{height}"):  # fmt: skip
        options.add_argument(arg)
    logs = {"browser": "ALL", **({"performance": "ALL"} if network_log else {})}
    options.set_capability("goog:loggingPrefs", logs)
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


def fresh_logs(driver) -> None:
    """Drop what a shared driver logged before (reading a log empties it)."""
    for log in driver.log_types:
        driver.get_log(log)


class Report:
    """The report at `html` in `driver` (a driver of headless_chromium, shared: left open)."""

    def __init__(self, html: Path, shots: Path, driver, width: int = 1400, height: int = 900):
        self.driver = driver
        self.driver.set_window_size(width, height)
        fresh_logs(driver)
        self.shots = shots
        self.visit = Visit()
        self.driver.get(html.resolve().as_uri())
        self.wait_for(lambda: self.sidebar_items())

    # --- what the page shows --------------------------------------------------------------

    def css(self, selector: str):
        from selenium.webdriver.common.by import By

        return self.driver.find_elements(By.CSS_SELECTOR, selector)

    def wait_for(self, condition, timeout: float = 10.0):
        return wait_for(condition, timeout)

    def sidebar_items(self) -> list[str]:
        """The texts of the side bar's list: headings and menu items, in order."""
        return [li.text.strip() for li in self.css(f"{SIDEBAR} div.p-3 > ul > li")]

    def click_item(self, text: str) -> None:
        link = next(a for a in self.css(f"{SIDEBAR} div.p-3 > ul > li > a") if a.text.strip() == text)
        link.click()

    def home(self) -> None:
        self.css(f"{SIDEBAR} ol > li a")[0].click()
        self.wait_for(lambda: "Workflow" in self.sidebar_items())

    def screenshot(self, name: str) -> Path:
        self.shots.mkdir(parents=True, exist_ok=True)
        path = self.shots / f"{len(self.visit.screenshots):02d}-{re.sub(r'[^A-Za-z0-9_.-]+', '_', name)}.png"
        self.driver.save_screenshot(str(path))
        self.visit.screenshots.append(path)
        return path

    def collect_console(self) -> None:
        self.visit.console += self.driver.get_log("browser")

    # --- walking it -----------------------------------------------------------------------

    def categories(self) -> list[str]:
        items = self.sidebar_items()
        # headings are styled uppercase, and .text is the text as shown
        if "GENERAL" not in items:  # one category: the menu item "Results" opens it (menu.js)
            return ["Results"] if "Results" in items else []
        return items[items.index("RESULTS") + 1 :] if "RESULTS" in items else []

    def open_category(self, category: str) -> list[str]:
        """Its subcategories; [""] where the category shows its table at once (one subcategory)."""
        self.home()
        self.click_item(category)
        self.wait_for(lambda: self.css(ROWS) or "Workflow" not in self.sidebar_items())
        return [""] if self.css(ROWS) else self.sidebar_items()

    def walk(self) -> Visit:
        self.screenshot("home")
        for category in self.categories():
            for subcategory in self.open_category(category):
                if subcategory:
                    self.open_category(category)
                    self.click_item(subcategory)
                self.wait_for(lambda: self.css(ROWS))
                self.view_table(category, subcategory)
        self.collect_console()
        return self.visit

    def toggle_choices(self) -> list:
        """The radio inputs of the table's toggles (a label with two values, abstract_results.js)."""
        return self.css(f"{SIDEBAR} fieldset input[type=radio]")

    def view_table(self, category: str, subcategory: str) -> None:
        choices = range(len(self.toggle_choices())) or [None]
        seen = set()
        for choice in choices:
            if choice is not None:
                radio = self.toggle_choices()[choice]
                self.driver.execute_script("arguments[0].click()", radio)  # the input is hidden, its label shown
            for i in range(len(self.css(ROWS))):
                row = self.css(ROWS)[i]
                labels = [td.text.strip() for td in row.find_elements("css selector", "td")][:-1]
                entry = self.view_entry(row, category, subcategory, labels)
                if (entry.filename, entry.data) not in seen:
                    seen.add((entry.filename, entry.data))
                    self.visit.entries.append(entry)
        self.screenshot(f"{category}-{subcategory}")

    def view_entry(self, row, category: str, subcategory: str, labels: list[str]) -> Entry:
        eye = row.find_elements("css selector", "div[role=group] > a")[0]
        href = eye.get_attribute("href") or ""
        if eye.get_dom_attribute("download") is not None:
            name, data = content(href)
            return Entry(category, subcategory, labels, "download", name, data, False)
        before = self.shown()
        eye.click()
        self.wait_for(lambda: self.shown() and self.shown() != before)
        kind, src = self.shown() or ("", "")
        name, data = content(src) if src else ("", b"")
        return Entry(category, subcategory, labels, kind, name, data, self.rendered(kind))

    def shown(self) -> tuple[str, str] | None:
        """What the view shows: ("img" or "iframe", its src), or None."""
        for kind in ("img", "iframe"):
            found = self.css(f"{VIEW} {kind}")
            if found:
                return kind, found[0].get_attribute("src") or ""
        return None

    def rendered(self, kind: str) -> bool:
        if kind == "img":
            img = self.css(f"{VIEW} img")[0]
            return bool(self.wait_for(lambda: self.driver.execute_script(
                "return arguments[0].complete && arguments[0].naturalWidth > 0", img)))  # fmt: skip
        if kind == "iframe":
            frame = self.css(f"{VIEW} iframe")[0]
            self.driver.switch_to.frame(frame)
            try:
                return bool(self.wait_for(lambda: self.driver.execute_script(
                    "return document.readyState === 'complete' && document.body !== null")))  # fmt: skip
            finally:
                self.driver.switch_to.default_content()
        return False


def visit_report(html: Path, shots: Path, driver, copy_to: Path | None = None) -> Visit:
    """Open every entry of the report at `html` in `driver`; screenshots in `shots` (and copies in `copy_to`)."""
    visit = Report(html, shots, driver).walk()
    if copy_to is not None:
        copy_to.mkdir(parents=True, exist_ok=True)
        for shot in visit.screenshots:
            shutil.copy2(shot, copy_to / shot.name)
    return visit
