#!/usr/bin/env python3
"""Check in a real headless Chromium what the operator's page offers on each row, that its
list follows the team live, that its events read as `iapeer logs` prints them, that a send
from it is the page's, and that it works on a phone-sized screen (issue 30 item 5).

Called by tests/ui.rs (`the_page_offers_what_works_follows_the_team_and_fits_a_phone`) with a
running daemon whose team is alice (echo, asleep), you (human), timer (notifier) and cb, a
claude peer whose program the daemon cannot find. The iapeer CLI runs with the environment it
was given (HOME and IAPEER_ROOT of the test's temp world).

    page.py --url <link> --bin <iapeer> --chromium <path> --chromedriver <path>
            --shots <folder> --marker <unique text>

Saves wide.png and narrow.png (390x844) in --shots and prints their paths. Exits non-zero
naming the check that failed.
"""

import argparse
import os
import re
import sys
import time

from selenium.webdriver.common.by import By

from drive import cli, click, drive, runtime_status, send_from_page, step, text_of, wait_for

# How soon a peer made with the CLI must be on the open page: the event stream brings it
# (the page's fallback poll is every 15 s).
LIVE_WITHIN = 3.0


def verbs(driver, peer):
    """The verbs of the buttons on `peer`'s row, in order."""
    return [b.get_attribute("data-verb")
            for b in driver.find_elements(By.CSS_SELECTOR, f'tr[data-peer="{peer}"] button[data-verb]')]


def row_exists(driver, peer):
    return bool(driver.find_elements(By.CSS_SELECTOR, f'tr[data-peer="{peer}"]'))


def appears_within(driver, what, cond, within):
    """Wait for `cond` and return how long it took; fail when it took longer than `within`."""
    start = time.monotonic()
    wait_for(driver, what, cond, timeout=within + 20)
    took = time.monotonic() - start
    step(f"{what}: {took:.2f} s")
    assert took <= within, f"{what} took {took:.2f} s (more than {within} s)"
    return took


def main():
    ap = argparse.ArgumentParser()
    for flag in ("--url", "--bin", "--chromium", "--chromedriver", "--shots", "--marker"):
        ap.add_argument(flag, required=True)
    a = ap.parse_args()
    return drive(a.chromium, a.chromedriver, lambda d: run(d, a),
                 os.path.join(a.shots, "failed.png"))


def run(driver, a):
    step("sign in")
    driver.get(a.url)
    wait_for(driver, "the redirect to /ui/", lambda d: d.current_url.endswith("/ui/"))
    for peer in ("alice", "you", "timer", "cb"):
        wait_for(driver, f"the row of {peer}", lambda d, p=peer: row_exists(d, p))
    wait_for(driver, "the event stream connected",
             lambda d: d.find_element(By.ID, "conn").get_attribute("data-state") == "live")
    wait_for(driver, "you live on human", lambda d: runtime_status(d, "you", "human") == "live")
    wait_for(driver, "timer live on notifier",
             lambda d: runtime_status(d, "timer", "notifier") == "live")

    step("a human's and a service's row offer what works on them: no wake, no compact")
    for peer in ("you", "timer"):
        wait_for(driver, f"{peer}'s buttons", lambda d, p=peer: verbs(d, p) == ["restart", "stop"])

    step("the peer the daemon cannot start says why on its row, offers nothing")
    assert runtime_status(driver, "cb", "claude") == "missing", runtime_status(driver, "cb", "claude")
    problem = text_of(driver, 'tr[data-peer="cb"] .problem')
    assert "claude is not installed" in problem and "looked at" in problem, problem
    assert verbs(driver, "cb") == [], verbs(driver, "cb")

    step("an echo agent asleep offers wake, new, stop; wake works")
    wait_for(driver, "alice's buttons", lambda d: verbs(d, "alice") == ["wake", "new", "stop"])
    click(driver, 'button[data-verb="wake"][data-peer="alice"]')
    wait_for(driver, "wake answered",
             lambda d: "wake alice: done" in text_of(d, "#action-result"))
    wait_for(driver, "alice live", lambda d: runtime_status(d, "alice", "echo") == "live")
    step("live, it offers interrupt (the echo agent has no compact); interrupt works")
    wait_for(driver, "alice's live buttons",
             lambda d: verbs(d, "alice") == ["interrupt", "restart", "new", "stop"])
    click(driver, 'button[data-verb="interrupt"][data-peer="alice"]')
    wait_for(driver, "interrupt answered",
             lambda d: "interrupt alice: done" in text_of(d, "#action-result"))

    step("a peer made with the CLI appears without a reload")
    cli(a.bin, "create", "carol", "--runtime", "echo")
    appears_within(driver, "carol's row", lambda d: row_exists(d, "carol"), LIVE_WITHIN)
    step("renamed, its row follows")
    cli(a.bin, "rename", "carol", "dave")
    appears_within(driver, "dave's row in place of carol's",
                   lambda d: row_exists(d, "dave") and not row_exists(d, "carol"), LIVE_WITHIN)
    step("removed, its row goes")
    cli(a.bin, "remove", "dave")
    appears_within(driver, "dave's row gone", lambda d: not row_exists(d, "dave"), LIVE_WITHIN)

    step("a send from the page; alice's events read as iapeer logs prints them")
    send_from_page(driver, "alice", a.marker)
    click(driver, 'tr[data-peer="alice"] td:first-child')
    wait_for(driver, "the page's delivery in alice's events",
             lambda d: "you → alice  delivered" in text_of(d, "#events li[data-ev='delivery']"))
    lines = [li.text for li in driver.find_elements(By.CSS_SELECTOR, "#events li")]
    clock = re.compile(r"^(\d{4}-\d\d-\d\d )?([01]\d|2[0-3]):[0-5]\d:[0-5]\d ")
    for line in lines:
        assert clock.match(line), f"not a 24-hour time first: {line!r}"
        assert not re.search(r"\b[AP]M\b", line), f"a 12-hour time: {line!r}"
        assert "ev=" not in line and "src=" not in line, f"a raw log line: {line!r}"
    assert any("alice (echo)  woke" in l for l in lines), lines
    assert any(l.endswith("alice (echo)  interrupt") for l in lines), lines
    wait_for(driver, "the answer in the inbox", lambda d: ("echo: " + a.marker) in text_of(d, "#inbox"))
    inbox_times = [e.text for e in driver.find_elements(By.CSS_SELECTOR, "#inbox .who")]
    assert inbox_times and all(clock.match(t + " ") or clock.match(t) for t in inbox_times), inbox_times
    wide = os.path.join(a.shots, "wide.png")
    driver.save_screenshot(wide)
    step(f"screenshot (wide) saved to {wide}")

    step("a phone-sized screen (390x844): nothing wider than the screen, the buttons reachable")
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": 390, "height": 844, "deviceScaleFactor": 2, "mobile": True})
    wait_for(driver, "the narrow layout", lambda d: d.execute_script("return window.innerWidth") == 390)
    fits = """
        const w = window.innerWidth;
        const wide = Array.from(document.querySelectorAll('body *')).filter((e) => {
          const r = e.getBoundingClientRect();
          return r.width > 0 && r.right > w + 0.5 && getComputedStyle(e).position !== 'fixed' &&
            !e.closest('.screen');
        }).map((e) => e.tagName + (e.id ? '#' + e.id : '') + '.' + e.className);
        return [document.documentElement.scrollWidth, w, wide.slice(0, 8)];
    """
    scroll_width, inner, wide_els = driver.execute_script(fits)
    step(f"scrollWidth {scroll_width}, innerWidth {inner}")
    assert scroll_width <= inner, f"the page is {scroll_width} px wide on a {inner} px screen: {wide_els}"
    assert not wide_els, f"elements past the screen's right edge: {wide_els}"
    for peer in ("alice", "you", "timer"):
        for b in driver.find_elements(By.CSS_SELECTOR, f'tr[data-peer="{peer}"] button[data-verb]'):
            driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", b)
            rect = driver.execute_script(
                "const r = arguments[0].getBoundingClientRect(); return [r.left, r.right, r.height];", b)
            assert b.is_displayed() and rect[0] >= 0 and rect[1] <= inner, (peer, b.text, rect)
            assert rect[2] >= 24, f"{peer}'s {b.text} button is {rect[2]} px high: too small for a finger"
    assert "claude is not installed" in text_of(driver, 'tr[data-peer="cb"] .problem')
    step("stop and start alice on the phone")
    click(driver, 'button[data-verb="stop"][data-peer="alice"]')
    wait_for(driver, "alice stopped", lambda d: runtime_status(d, "alice", "echo") == "stopped")
    wait_for(driver, "alice's stopped buttons", lambda d: verbs(d, "alice") == ["start"])
    click(driver, 'button[data-verb="start"][data-peer="alice"]')
    wait_for(driver, "alice not stopped",
             lambda d: runtime_status(d, "alice", "echo") in ("asleep", "live"))
    driver.execute_script("window.scrollTo(0, 0);")
    narrow = os.path.join(a.shots, "narrow.png")
    driver.save_screenshot(narrow)
    step(f"screenshot (narrow) saved to {narrow}")


if __name__ == "__main__":
    sys.exit(main())
