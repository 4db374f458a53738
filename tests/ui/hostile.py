#!/usr/bin/env python3
"""Check in a real headless Chromium that the operator's page shows hostile text inert.

Called by tests/ui.rs (`hostile_text_is_inert_visible_text_in_a_real_browser`) with a running
daemon whose peer alice has a description, a notice, a pending approval and (in the human's
inbox) a message, each carrying the payload family of issue 26 item 4 and an HTML tag with an
`onerror` script. The page must insert each as text, never HTML (no element from the text, no
script run) and show every control, bidi and separator character as its visible stand-in.

    hostile.py --url <link of iapeer ui --print> --chromium <path> --chromedriver <path>
               --shown <JSON list of stand-in texts every place must show>
               --tag <the HTML text each carries>

Exits non-zero naming the check that failed.
"""

import argparse
import json
import sys

from selenium.webdriver.common.by import By

from drive import click, drive, step, wait_for

# What must never be in the page's text: a C0 control but LF and TAB, DEL, a C1 control, a
# bidi control, U+2028/U+2029 (the characters src/visible.rs shows as stand-ins).
ACTS = ("[\\u0000-\\u0008\\u000b-\\u001f\\u007f-\\u009f\\u061c\\u200e\\u200f"
        "\\u2028-\\u202e\\u2066-\\u2069]")


def text_content(driver, css):
    return driver.execute_script(
        "const e = document.querySelector(arguments[0]); return e ? e.textContent : null;", css)


def check_place(driver, name, css, shown, tag):
    text = text_content(driver, css)
    assert text is not None, f"{name}: nothing at {css}"
    raw = driver.execute_script(
        "return Array.from(arguments[0].matchAll(new RegExp(arguments[1], 'g')))"
        ".map((m) => m[0].codePointAt(0).toString(16));", text, ACTS)
    assert not raw, f"{name}: raw characters {raw} in {text!r}"
    for part in shown:
        assert part in text, f"{name}: {part!r} not shown in {text!r}"
    assert tag in text, f"{name}: the HTML is not shown as text: {text!r}"
    inside = driver.execute_script(
        "return document.querySelectorAll(arguments[0] + ' img, ' + arguments[0] + ' b').length;",
        css)
    assert inside == 0, f"{name}: {inside} element(s) made from the text"


def main():
    ap = argparse.ArgumentParser()
    for flag in ("--url", "--chromium", "--chromedriver", "--shown", "--tag"):
        ap.add_argument(flag, required=True)
    a = ap.parse_args()
    return drive(a.chromium, a.chromedriver, lambda d: run(d, a, json.loads(a.shown)))


def run(driver, a, shown):
    step("sign in")
    driver.get(a.url)
    wait_for(driver, "the redirect to /ui/", lambda d: d.current_url.endswith("/ui/"))
    wait_for(driver, "alice's row", lambda d: d.find_elements(By.CSS_SELECTOR, 'tr[data-peer="alice"]'))
    wait_for(driver, "the approval", lambda d: d.find_elements(By.CSS_SELECTOR, "#approvals li.approval"))
    wait_for(driver, "the message", lambda d: d.find_elements(By.CSS_SELECTOR, "#inbox li[data-id]"))
    wait_for(driver, "the notice", lambda d: d.find_elements(By.CSS_SELECTOR, "#notices li[data-notice]"))

    step("the description is inert visible text")
    check_place(driver, "description", 'tr[data-peer="alice"] .desc', shown, a.tag)
    desc = text_content(driver, 'tr[data-peer="alice"] .desc')
    assert "c\u2424second line" in desc, f"a one-line field shows its line break as \u2424: {desc!r}"

    step("the notice is inert visible text")
    check_place(driver, "notice", "#notices li[data-notice]", shown, a.tag)

    step("the approval's command is inert visible text")
    check_place(driver, "approval", "#approvals li.approval .summary", shown, a.tag)

    step("the message is inert visible text, its line break a line break")
    check_place(driver, "message", "#inbox li[data-id] .body", shown, a.tag)
    body = text_content(driver, "#inbox li[data-id] .body")
    assert "c\nsecond line" in body, f"the body keeps its line break: {body!r}"
    topic = text_content(driver, "#inbox li[data-id] .who")
    assert "\u241b]52;c;" in topic and "<U+202E>" in topic, f"the topic: {topic!r}"

    step("alice's events show the logged command inert")
    click(driver, 'tr[data-peer="alice"] td:first-child')
    wait_for(driver, "the approval-requested event",
             lambda d: d.find_elements(By.CSS_SELECTOR, "#events li[data-ev='approval-requested']"))
    # As `iapeer logs` prints it: the logged value quoted, its `"` written `\"`.
    check_place(driver, "event", "#events li[data-ev='approval-requested']", shown,
                a.tag.replace('"', '\\"'))

    step("no script from the text ran")
    assert driver.title == "iapeer — the team", driver.title
    assert driver.execute_script("return window.__pwned === undefined;"), "window.__pwned is set"


if __name__ == "__main__":
    sys.exit(main())
