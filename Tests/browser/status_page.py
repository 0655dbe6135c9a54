#!/usr/bin/python3
"""Drives Labstream's status page in headless Chromium (Debian's chromium, chromium-driver and
python3-selenium), for BrowserTests.swift, which starts a real daemon and its emulated server.

It is refused without the token and with a wrong one, signs in with the right one (read from
--token-file: never on a command line), sees --downloading advance to complete with a progress
bar (it pins it with the search box first), pins --to-pin the same way and sees it queued
behind it in the page's queue, presses --to-pin's First button and sees the page's queue (and
the API's GET /api/queue) put it in front. Every wait is a WebDriverWait on a condition of the
page or of the API, never a sleep; the timeouts are generous so a loaded machine only slows it. Prints one line per step; exits
non-zero, naming the step, when one does not hold.
"""
import argparse
import json
import sys
import urllib.request

from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, TimeoutException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--token-file", required=True)
    ap.add_argument("--downloading", required=True)
    ap.add_argument("--to-pin", required=True)
    ap.add_argument("--search-downloading", required=True)
    ap.add_argument("--search-to-pin", required=True)
    ap.add_argument("--screenshot")
    args = ap.parse_args()
    with open(args.token_file) as f:
        token = f.read().strip()

    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1000,1100"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    step = "start"
    try:
        wait = WebDriverWait(driver, 60, poll_frequency=0.1)

        def shown(element_id):
            return wait.until(lambda d: d.find_element(By.ID, element_id) if d.find_element(By.ID, element_id).is_displayed() else False)

        def sign_in(text):
            field = shown("token")
            field.clear()
            if text:
                field.send_keys(text)
            driver.find_element(By.ID, "signin").click()

        # The page redraws its lists at every poll: a row is read in one script, never held.
        def row(list_id, path):
            return driver.execute_script(
                "const li = [...document.querySelectorAll('#' + arguments[0] + ' li[data-path]')].find(e => e.dataset.path === arguments[1]);"
                "if (!li) return null; const p = li.querySelector('progress');"
                "return {state: li.dataset.state, progress: p ? Number(p.value) : null, rate: li.querySelector('.rate') !== null};",
                list_id, path)

        step = "refused without the token"
        driver.get(args.url)
        sign_in("")
        wait.until(lambda d: "needs the token" in d.find_element(By.ID, "login-error").text)
        assert not driver.find_element(By.ID, "app").is_displayed()
        print("ok: " + step)

        step = "refused with a wrong token"
        sign_in("0" * 64)
        wait.until(lambda d: "refused" in d.find_element(By.ID, "login-error").text)
        assert not driver.find_element(By.ID, "app").is_displayed()
        assert driver.execute_script("return sessionStorage.getItem('labstream-token')") is None
        print("ok: " + step)

        step = "signed in"
        sign_in(token)
        shown("app")
        wait.until(lambda d: "online" in d.find_element(By.CSS_SELECTOR, "#servers li").text)
        print("ok: " + step)

        def pin_from_search(words, path):
            box = driver.find_element(By.ID, "search")
            box.clear()
            box.send_keys(words)
            driver.find_element(By.CSS_SELECTOR, "#searchform button").click()
            wait.until(lambda d: (lambda r: r and r["state"] == "not-local")(row("results", path)))
            hit = [li for li in driver.find_elements(By.CSS_SELECTOR, "#results li[data-path]") if li.get_attribute("data-path") == path][0]
            hit.find_element(By.CSS_SELECTOR, "button.pin").click()

        step = "pin from the search box"
        pin_from_search(args.search_downloading, args.downloading)
        print("ok: " + step)

        step = "the pinned file's progress advances"
        first = wait.until(lambda d: (lambda r: r["progress"] if r and r["progress"] < 100 else False)(row("files", args.downloading)))
        wait.until(lambda d: (lambda r: r and r["progress"] > first)(row("files", args.downloading)))
        wait.until(lambda d: (lambda r: r and r["rate"])(row("files", args.downloading)))
        print("ok: %s (from %d%%, with a rate)" % (step, first))

        step = "pin another file, and it is queued"
        pin_from_search(args.search_to_pin, args.to_pin)
        wait.until(lambda d: (lambda r: r and r["state"] == "queued")(row("files", args.to_pin)))
        print("ok: " + step)

        if args.screenshot:
            driver.save_screenshot(args.screenshot)

        def page_queue():
            return driver.execute_script("return [...document.querySelectorAll('#queue li[data-path]')].map(e => e.dataset.path)")

        def api_queue():
            ask = urllib.request.Request(args.url.rstrip("/") + "/api/queue", headers={"Authorization": "Bearer " + token})
            with urllib.request.urlopen(ask, timeout=30) as answer:
                return [e["path"] for e in json.load(answer)["queue"]]

        step = "the queue lists the downloading file, then the queued one"
        wait.until(lambda d: page_queue() == [args.downloading, args.to_pin])
        print("ok: " + step)

        # The row is redrawn every second: a click that lands on a row just replaced is tried again.
        def press(list_id, path, css):
            try:
                li = [e for e in driver.find_elements(By.CSS_SELECTOR, "#%s li[data-path]" % list_id) if e.get_attribute("data-path") == path]
                if not li:
                    return False
                b = li[0].find_element(By.CSS_SELECTOR, css)
                if not b.is_enabled():
                    return False
                b.click()
                return True
            except StaleElementReferenceException:
                return False

        step = "First puts the queued file in front"
        wait.until(lambda d: press("queue", args.to_pin, "button.first"))
        wait.until(lambda d: page_queue() == [args.to_pin, args.downloading])
        wait.until(lambda d: api_queue() == [args.to_pin, args.downloading])
        wait.until(lambda d: d.execute_script(
            "const li = [...document.querySelectorAll('#queue li[data-path]')][0];"
            "return li.dataset.position === '1' && li.querySelector('button.first').disabled;"))
        print("ok: " + step)

        # It now waits for the other film to be fetched first.
        step = "the pinned file completes"
        slow = WebDriverWait(driver, 300, poll_frequency=0.2)
        slow.until(lambda d: (lambda r: r and r["progress"] == 100 and r["state"] in ("complete", "unverified"))(row("files", args.downloading)))
        wait.until(lambda d: row("events", args.downloading))
        print("ok: " + step)

        step = "usable at phone width"
        driver.set_window_size(390, 844)
        wait.until(lambda d: d.execute_script("return window.innerWidth") <= 400)
        assert driver.execute_script("return document.documentElement.scrollWidth <= window.innerWidth"), "the page scrolls sideways"
        print("ok: " + step)
    except (TimeoutException, AssertionError) as e:
        print("FAILED: %s: %s" % (step, e or "timed out"), file=sys.stderr)
        print(driver.find_element(By.TAG_NAME, "body").text, file=sys.stderr)
        return 1
    finally:
        driver.quit()
    return 0


if __name__ == "__main__":
    sys.exit(main())
