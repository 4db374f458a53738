#!/usr/bin/env python3
"""Drive the operator's page (`iapeer ui`) in a real headless Chromium through Selenium.

Called by tests/ui.rs with a running daemon (echo peers alice and bob, the human peer you):
every step waits for what a person would see on the page, never reloads it, and exits
non-zero naming the step that failed. The iapeer CLI runs with the environment it was given
(HOME and IAPEER_ROOT of the test's temp world).

    drive.py --url <link of iapeer ui --print> --bin <iapeer> --chromium <path>
             --chromedriver <path> --screenshot <png> --marker <unique text>
             --approve <command> --deny <command> --deny-reason <text> --third <command>

Two permission prompts are pending when it starts (asked by alice's session for the Bash
commands --approve and --deny): the page approves the one and denies the other with the
reason, typed into the page. A third (--third) is asked once the script prints a step
ending in "(ask-now)"; the page denies it without a reason.
"""

import argparse
import subprocess
import sys
import time
import traceback

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.common.exceptions import (
    NoSuchElementException,
    StaleElementReferenceException,
    TimeoutException,
)
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait

# Generous: a loaded 2-core machine runs the daemon, its peers and Chromium side by side.
WAIT = 90


def step(name):
    print(f"drive: {name}", flush=True)


def wait_for(driver, what, cond, timeout=WAIT):
    """Wait until `cond(driver)` is true. The page redraws its lists as events arrive, so an
    element read a moment ago may be gone (stale): that counts as "not yet"."""
    wait = WebDriverWait(driver, timeout, poll_frequency=0.25,
                         ignored_exceptions=(StaleElementReferenceException, NoSuchElementException))
    try:
        return wait.until(lambda d: cond(d))
    except TimeoutException as e:
        raise AssertionError(f"timed out after {timeout}s waiting for {what}") from e


def click(driver, css):
    """Click the element `css` names; the page redraws its lists as events arrive, so an
    element found a moment ago may be gone: find it again and retry."""
    def attempt(d):
        try:
            d.find_element(By.CSS_SELECTOR, css).click()
            return True
        except (StaleElementReferenceException, NoSuchElementException):
            return False
    wait_for(driver, f"a click on {css}", attempt)


def text_of(driver, css):
    els = driver.find_elements(By.CSS_SELECTOR, css)
    return "\n".join(e.text for e in els)


def send_from_page(driver, to, message):
    """Write `message` to `to` in the compose box, send it and wait for "delivered to <to>"."""
    Select(driver.find_element(By.ID, "to")).select_by_value(to)
    box = driver.find_element(By.ID, "message")
    box.clear()
    box.send_keys(message)
    click(driver, "#send")
    wait_for(driver, "the send's answer",
             lambda d: f"delivered to {to}" in d.find_element(By.ID, "send-result").text)


def runtime_status(driver, peer, runtime):
    els = driver.find_elements(
        By.CSS_SELECTOR, f'tr[data-peer="{peer}"] .state[data-runtime="{runtime}"]'
    )
    return els[0].get_attribute("data-status") if els else None


def approval_id(driver, command):
    """The id of the pending approval shown for `command`, or None."""
    for li in driver.find_elements(By.CSS_SELECTOR, "#approvals li.approval"):
        if li.find_element(By.CSS_SELECTOR, ".summary").text == command:
            return li.get_attribute("data-id")
    return None


def cli(binary, *args):
    out = subprocess.run([binary, *args], capture_output=True, text=True, timeout=180)
    if out.returncode != 0:
        raise AssertionError(f"iapeer {' '.join(args)} failed: {out.stdout}{out.stderr}")
    return out.stdout


def drive(chromium, chromedriver, steps, failed_png=None):
    """Open a headless Chromium through `chromedriver` and run `steps(driver)`; the exit code:
    0, or 1 after printing the failure and the page's text (and saving `failed_png`)."""
    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1400,1300", "--no-first-run", "--disable-extensions"):
        opts.add_argument(arg)
    driver = webdriver.Chrome(service=Service(executable_path=chromedriver), options=opts)
    driver.set_page_load_timeout(WAIT)
    try:
        steps(driver)
    except Exception:
        traceback.print_exc()
        try:
            if failed_png:
                driver.save_screenshot(failed_png)
            print("drive: page text at the failure:\n" + driver.find_element(By.TAG_NAME, "body").text)
        except Exception:
            pass
        return 1
    finally:
        driver.quit()
    print("drive: ok", flush=True)
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--chromium", required=True)
    ap.add_argument("--chromedriver", required=True)
    ap.add_argument("--screenshot", required=True)
    ap.add_argument("--marker", required=True)
    ap.add_argument("--approve", required=True)
    ap.add_argument("--deny", required=True)
    ap.add_argument("--deny-reason", required=True)
    ap.add_argument("--third", required=True)
    a = ap.parse_args()
    return drive(a.chromium, a.chromedriver, lambda d: run(d, a),
                 a.screenshot.replace(".png", "-failed.png"))


def run(driver, a):
    base = a.url.split("?")[0]

    step("without the link's key the page is refused and says to run iapeer ui")
    driver.get(base)
    body = driver.find_element(By.TAG_NAME, "body").text
    assert "iapeer ui" in body, body

    step("the link signs in and drops the key from the address")
    driver.get(a.url)
    wait_for(driver, "the redirect to /ui/", lambda d: d.current_url.endswith("/ui/"))
    assert "k=" not in driver.current_url, driver.current_url

    step("the page lists every peer with its state")
    for peer in ("alice", "bob", "you"):
        wait_for(driver, f"the row of {peer}",
                 lambda d, p=peer: d.find_elements(By.CSS_SELECTOR, f'tr[data-peer="{p}"]'))
    wait_for(driver, "you live on human", lambda d: runtime_status(d, "you", "human") == "live")
    wait_for(driver, "alice asleep or live",
             lambda d: runtime_status(d, "alice", "echo") in ("asleep", "live"))
    wait_for(driver, "the event stream connected",
             lambda d: d.find_element(By.ID, "conn").get_attribute("data-state") == "live")

    step("the two pending approvals are listed: who asks, the tool, the command, the times")
    for command in (a.approve, a.deny):
        wait_for(driver, f"the approval for {command}",
                 lambda d, c=command: approval_id(d, c) is not None)
    approve_id = approval_id(driver, a.approve)
    deny_id = approval_id(driver, a.deny)
    for aid in (approve_id, deny_id):
        text = driver.find_element(By.CSS_SELECTOR, f'#approvals li[data-id="{aid}"]').text
        for part in ("alice", "(echo)", "wants Bash", "asked ", "denied unanswered in ", "Approve",
                     "Deny"):
            assert part in text, (part, text)

    step("select bob, then a message sent with the CLI shows up live (no reload)")
    click(driver, 'tr[data-peer="bob"] td:first-child')
    wait_for(driver, "bob selected", lambda d: d.find_element(By.ID, "peer-name").text == "bob")
    marker_cli = a.marker + "-cli"
    cli(a.bin, "send", "bob", "--from", "human-you", "--message", marker_cli)
    wait_for(driver, "bob live in the list", lambda d: runtime_status(d, "bob", "echo") == "live")
    wait_for(driver, "the delivery to bob in bob's events",
             lambda d: "→ bob" in text_of(d, "#events li[data-ev='delivery']"))
    wait_for(driver, "the message on bob's live screen",
             lambda d: marker_cli in d.find_element(By.ID, "screen").text)
    wait_for(driver, "bob's answer in the human's inbox",
             lambda d: ("echo: " + marker_cli) in d.find_element(By.ID, "inbox").text)

    step("the compose box sends to alice")
    Select(driver.find_element(By.ID, "to")).select_by_value("alice")
    marker_page = a.marker + "-page"
    box = driver.find_element(By.ID, "message")
    box.clear()
    box.send_keys(marker_page)
    click(driver, "#send")
    wait_for(driver, "the send's answer",
             lambda d: "delivered to alice" in d.find_element(By.ID, "send-result").text)
    click(driver, 'tr[data-peer="alice"] td:first-child')
    wait_for(driver, "the page's message on alice's live screen",
             lambda d: marker_page in d.find_element(By.ID, "screen").text)
    wait_for(driver, "alice's answer in the inbox, with a reply button",
             lambda d: ("echo: " + marker_page) in d.find_element(By.ID, "inbox").text)
    driver.save_screenshot(a.screenshot)
    step(f"screenshot saved to {a.screenshot}")

    step("the reply button addresses the sender")
    click(driver, "#inbox li button.reply")
    wait_for(driver, "the reply addressed to alice",
             lambda d: d.find_element(By.ID, "to").get_attribute("value") == "alice")

    step("Approve lets the first command run; the list drops it")
    click(driver, f'#approvals li[data-id="{approve_id}"] button.approve')
    wait_for(driver, "approve answered",
             lambda d: f"approved {approve_id} (echo-alice)" in d.find_element(By.ID, "approval-result").text)
    wait_for(driver, "the approved prompt gone from the list",
             lambda d: approval_id(d, a.approve) is None and approval_id(d, a.deny) == deny_id)

    step("Deny with a reason refuses the second; the list says none")
    box = driver.find_element(By.CSS_SELECTOR, f'#approvals li[data-id="{deny_id}"] input.reason')
    box.send_keys(a.deny_reason)
    click(driver, f'#approvals li[data-id="{deny_id}"] button.deny')
    wait_for(driver, "deny answered",
             lambda d: f"denied {deny_id} (echo-alice)" in d.find_element(By.ID, "approval-result").text)
    wait_for(driver, 'the approvals section saying "none"',
             lambda d: d.find_element(By.ID, "approvals").text.strip() == "none")

    # tests/ui.rs asks the third prompt when it reads this line; the event stream brings it
    # (the page's own periodic refresh is every 15 s).
    step("a prompt asked while the page is open shows up at once (ask-now)")
    wait_for(driver, f"the approval for {a.third}", lambda d: approval_id(d, a.third) is not None,
             timeout=12)
    third_id = approval_id(driver, a.third)
    step("Deny without a reason")
    click(driver, f'#approvals li[data-id="{third_id}"] button.deny')
    wait_for(driver, "the second deny answered",
             lambda d: f"denied {third_id} (echo-alice)" in d.find_element(By.ID, "approval-result").text)
    wait_for(driver, 'the approvals section saying "none" again',
             lambda d: d.find_element(By.ID, "approvals").text.strip() == "none")
    out = cli(a.bin, "approvals", "--json")
    assert '"approvals":[]' in out.replace(" ", ""), out

    step("stop and start alice with the buttons")
    click(driver, 'button[data-verb="stop"][data-peer="alice"]')
    wait_for(driver, "stop answered",
             lambda d: "stop alice: done" in d.find_element(By.ID, "action-result").text)
    wait_for(driver, "alice shown stopped", lambda d: runtime_status(d, "alice", "echo") == "stopped")
    click(driver, 'button[data-verb="start"][data-peer="alice"]')
    wait_for(driver, "start answered",
             lambda d: "start alice: done" in d.find_element(By.ID, "action-result").text)
    wait_for(driver, "alice no longer stopped",
             lambda d: runtime_status(d, "alice", "echo") in ("asleep", "live"))
    # The stopped state was in the daemon, not only on the page.
    out = cli(a.bin, "list", "--json")
    assert '"stopped"' not in out, out


if __name__ == "__main__":
    sys.exit(main())
