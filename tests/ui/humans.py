#!/usr/bin/env python3
"""Check in a real headless Chromium that the operator's page lets a team of two people pick
whose inbox it shows and whom it writes as (issue 30 item 2).

Called by tests/ui.rs (`two_humans_pick_their_inbox_in_a_real_browser`) with a running daemon
whose human peers ann and you each have one message (texts --for-ann and --for-you) from alice.
The page must show a picker with both, show ann's inbox first (the first by name), switch to
you's inbox when you is picked, and send a message from the page as the picked person.

    humans.py --url <link of iapeer ui --print> --chromium <path> --chromedriver <path>
              --for-ann <text> --for-you <text> --reply <text to send> --screenshot <png>

Exits non-zero naming the check that failed.
"""

import argparse
import sys

from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from drive import drive, send_from_page, step, text_of, wait_for


def inbox_text(driver):
    return " ".join(e.text for e in driver.find_elements(By.CSS_SELECTOR, "#inbox li"))


def main():
    ap = argparse.ArgumentParser()
    for flag in ("--url", "--chromium", "--chromedriver", "--for-ann", "--for-you", "--reply",
                 "--screenshot"):
        ap.add_argument(flag, required=True)
    a = ap.parse_args()
    return drive(a.chromium, a.chromedriver, lambda d: run(d, a),
                 a.screenshot.replace(".png", "-failed.png"))


def run(driver, a):
    step("sign in")
    driver.get(a.url)
    wait_for(driver, "the redirect to /ui/", lambda d: d.current_url.endswith("/ui/"))

    step("the picker offers both people and shows ann's inbox first")
    wait_for(driver, "the picker", lambda d: d.find_element(By.ID, "human").is_displayed())
    pick = Select(driver.find_element(By.ID, "human"))
    names = [o.get_attribute("value") for o in pick.options]
    assert names == ["ann", "you"], names
    wait_for(driver, "ann's message", lambda d: a.for_ann in inbox_text(d))
    assert a.for_you not in inbox_text(driver), inbox_text(driver)
    assert "ann" in text_of(driver, "#inbox-name"), text_of(driver, "#inbox-name")
    assert text_of(driver, "#from") == "as human-ann", text_of(driver, "#from")

    step("picking you shows you's inbox and writes as you")
    pick.select_by_value("you")
    wait_for(driver, "you's message", lambda d: a.for_you in inbox_text(d))
    assert a.for_ann not in inbox_text(driver), inbox_text(driver)
    wait_for(driver, "the sender", lambda d: text_of(d, "#from") == "as human-you")

    step("a message from the page goes as you")
    send_from_page(driver, "ann", a.reply)
    driver.save_screenshot(a.screenshot)


if __name__ == "__main__":
    sys.exit(main())
