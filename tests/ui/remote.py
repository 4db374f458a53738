#!/usr/bin/env python3
"""Check in a real headless Chromium that the operator's page shows the other hosts' peers
grouped by host, online or offline, and sends to `name@host` (issue 28 items 2 and 6).

Called by tests/federation.rs (`the_page_shows_other_hosts_peers_and_sends_to_name_at_host`)
with host a's daemon running (alice on echo, you on human) joined to a federation whose host b
has bob and carol (carol stopped).

    remote.py --url <link> --chromium <path> --chromedriver <path> --phase online|offline
              [--marker <unique text>]

online: b's block says online, lists bob@b available and carol@b stopped, its "write" button
puts bob@b in the compose box, and the send is answered "delivered to bob@b". offline: b's
block says offline, bob@b is shown offline. Exits non-zero naming the check that failed.
"""

import argparse
import sys

from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from drive import click, drive, step, text_of, wait_for


def host_block(driver, host):
    els = driver.find_elements(By.CSS_SELECTOR, f'#remote .host[data-host="{host}"]')
    return els[0] if els else None


def peer_state(driver, address):
    els = driver.find_elements(By.CSS_SELECTOR, f'#remote li[data-address="{address}"]')
    return els[0].get_attribute("data-state") if els else None


def main():
    ap = argparse.ArgumentParser()
    for flag in ("--url", "--chromium", "--chromedriver", "--phase"):
        ap.add_argument(flag, required=True)
    ap.add_argument("--marker", default="")
    a = ap.parse_args()
    return drive(a.chromium, a.chromedriver, lambda d: run(d, a))


def run(driver, a):
    step("sign in")
    driver.get(a.url)
    wait_for(driver, "the redirect to /ui/", lambda d: d.current_url.endswith("/ui/"))
    wait_for(driver, "alice's row", lambda d: d.find_elements(By.CSS_SELECTOR, 'tr[data-peer="alice"]'))
    if a.phase == "offline":
        step("host b is shown offline, its peers with it")
        wait_for(driver, "b offline", lambda d: host_block(d, "b") is not None
                 and host_block(d, "b").get_attribute("data-online") == "false")
        assert "offline" in text_of(driver, '#remote .host[data-host="b"] h3')
        wait_for(driver, "bob@b offline", lambda d: peer_state(d, "bob@b") == "offline")
        return
    step("host b's block: online, bob available, carol stopped, local peers not in it")
    wait_for(driver, "b online", lambda d: host_block(d, "b") is not None
             and host_block(d, "b").get_attribute("data-online") == "true")
    assert driver.find_element(By.ID, "remote-section").is_displayed()
    assert "b online" in text_of(driver, '#remote .host[data-host="b"] h3'), \
        text_of(driver, '#remote .host[data-host="b"] h3')
    wait_for(driver, "bob@b available", lambda d: peer_state(d, "bob@b") == "available")
    wait_for(driver, "carol@b stopped", lambda d: peer_state(d, "carol@b") == "stopped")
    assert peer_state(driver, "alice@a") is None
    step("the recipients: this host's by name, b's as name@host in their group")
    options = [o.get_attribute("value") for o in driver.find_elements(By.CSS_SELECTOR, "#to option")]
    assert "alice" in options and "bob@b" in options and "carol@b" in options, options
    groups = [g.get_attribute("label") for g in driver.find_elements(By.CSS_SELECTOR, "#to optgroup")]
    assert groups == ["host b"], groups
    step("write to bob@b from its block and send")
    click(driver, '#remote button[data-write="bob@b"]')
    assert Select(driver.find_element(By.ID, "to")).first_selected_option.get_attribute("value") == "bob@b"
    box = driver.find_element(By.ID, "message")
    box.clear()
    box.send_keys(a.marker)
    click(driver, "#send")
    wait_for(driver, "the send's answer",
             lambda d: "delivered to bob@b (echo)" in d.find_element(By.ID, "send-result").text)


if __name__ == "__main__":
    sys.exit(main())
