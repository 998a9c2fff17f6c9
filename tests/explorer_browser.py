"""The explorer page (wqk.explorer) as a person uses it: in headless Chromium (Debian's
`chromium` and `chromium-driver`, as tests/report_browser.py), driven by selenium. Picks are
made with the page's own controls; what the page shows is read from its values table; every
request the page makes is read from Chrome's performance log (the DevTools Network events),
every console message from the browser log."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from report_browser import available, fresh_logs, wait_for

__all__ = ["Explorer", "available"]


class Explorer:
    """The explorer page in `driver` (headless_chromium with its network log, shared: left open)."""

    def __init__(self, page: Path, shots: Path, driver, width: int = 1400, height: int = 2100):
        self.driver = driver
        self.driver.set_window_size(width, height)
        fresh_logs(driver)
        self.page, self.shots = page.resolve(), shots
        self.screenshots: list[Path] = []
        self.console: list[dict] = []
        self.requests: list[str] = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.driver.get("about:blank")  # the next page starts from an empty one

    def open(self, hash_: str = "") -> None:
        self.driver.get(self.page.as_uri() + hash_)
        self.wait_for(lambda: self.shown())

    def wait_for(self, condition, timeout: float = 20.0):
        return wait_for(condition, timeout)

    def element(self, css: str):
        from selenium.webdriver.common.by import By

        return self.driver.find_element(By.CSS_SELECTOR, css)

    def shown(self) -> str:
        """model|stack|layer|head the page has drawn, '' before it has."""
        return self.driver.execute_script("return document.body.dataset.shown || ''")

    def select(self, control: str, value) -> None:
        """Choose `value` in one of the page's <select>s, as a click would (a change event)."""
        from selenium.webdriver.support.ui import Select

        Select(self.element(f"#{control}")).select_by_value(str(value))

    def options(self, control: str) -> list[str]:
        return [o.get_attribute("value") for o in self.element(f"#{control}").find_elements("css selector", "option")]

    def pick(self, model: str, stack: str, layer: int, head: int) -> None:
        for control, value in (("model", model), ("stack", stack), ("layer", layer), ("head", head)):
            self.select(control, value)
        want = f"{model}|{stack}|{layer}|{head}"
        assert self.wait_for(lambda: self.shown() == want), (self.shown(), want)

    def search(self, text: str) -> None:
        box = self.element("#search")
        box.clear()
        box.send_keys(text)

    def values(self) -> dict[str, dict[str, str]]:
        """The values table: metric -> {"head", "layer", "null"} as shown."""
        rows = self.driver.find_elements("css selector", "#head-values tbody tr")
        return {
            r.get_attribute("data-metric"): {
                k: r.find_element("css selector", f"td.{k}").text for k in ("head", "layer", "null")
            }
            for r in rows
        }

    def drawn(self) -> dict[str, int]:
        """Plot id -> number of traces Plotly has drawn in it (hidden plots left out)."""
        return self.driver.execute_script(
            "const out = {}; document.querySelectorAll('.plot').forEach(function (d) {"
            " if (!d.classList.contains('hidden') && d.data) out[d.id] = d.data.length; }); return out;"
        )

    def message(self) -> str:
        return self.element("#message").text

    def covered_titles(self) -> dict[str, str]:
        """Plot id -> its title, for every drawn plot whose title Plotly's mode bar covers while
        the pointer is over the plot (the bar shows on hover)."""
        from selenium.webdriver.common.action_chains import ActionChains

        covered = {}
        for plot in self.driver.find_elements("css selector", ".plot:not(.hidden)"):
            ActionChains(self.driver).move_to_element(plot).perform()
            overlap = self.driver.execute_script(
                "const p = arguments[0], bar = p.querySelector('.modebar'), title = p.querySelector('.gtitle');"
                "if (!bar || !title || !bar.getBoundingClientRect().width) return null;"
                "const a = bar.getBoundingClientRect(), b = title.getBoundingClientRect();"
                "return a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom"
                " ? title.textContent : null;",
                plot,
            )
            if overlap:
                covered[plot.get_attribute("id")] = overlap
        return covered

    def screenshot(self, name: str) -> Path:
        self.shots.mkdir(parents=True, exist_ok=True)
        path = self.shots / f"{len(self.screenshots):02d}-{re.sub(r'[^A-Za-z0-9_.-]+', '_', name)}.png"
        self.driver.save_screenshot(str(path))
        self.screenshots.append(path)
        return path

    def collect_logs(self) -> None:
        self.console += self.driver.get_log("browser")
        for entry in self.driver.get_log("performance"):
            message = json.loads(entry["message"])["message"]
            if message["method"] == "Network.requestWillBeSent":
                self.requests.append(message["params"]["request"]["url"])

    def errors(self) -> list[dict]:
        return [m for m in self.console if m["level"] == "SEVERE"]

    def copy_screenshots(self, to: Path) -> None:
        to.mkdir(parents=True, exist_ok=True)
        for shot in self.screenshots:
            shutil.copy2(shot, to / shot.name)
