#!/usr/bin/python3
"""Drives Labstream's status page in headless Chromium (Debian's chromium, chromium-driver and
python3-selenium), for BrowserTests.swift, which starts a real daemon and its emulated server.

It is refused without the token and with a wrong one, signs in with the right one (read from
--token-file: never on a command line), sees --downloading advance to complete with a progress
bar (it pins it with the search box first), pins --to-pin the same way and sees it queued
behind it in the page's queue, presses --to-pin's First button and sees the page's queue (and
the API's GET /api/queue) put it in front.

With --scenario controls it presses the per-file controls and checks each one's effect through
the API: Verify (a stored copy cut short on disk is found failed), Retry (it is fetched again),
Pause (the file is paused by the user), Resume (it goes on), Retry on a file parked over the storage budget (the page shows the daemon's "parked
again" answer in words), and monitors a series from the search's results and stops monitoring
it. With --scenario trouble it reads what the page says of a server whose sign-in is refused and
whose event channel is lost. Every wait is a WebDriverWait on a condition of the
page or of the API, never a sleep; the timeouts are generous so a loaded machine only slows it. Prints one line per step; exits
non-zero, naming the step, when one does not hold.
"""
import argparse
import json
import sys
import urllib.parse
import urllib.request

from selenium import webdriver
from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException, TimeoutException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait


class Failed(Exception):
    """A step of a scenario that did not hold (its name and why)."""


def checked(step, condition):
    try:
        return condition()
    except (TimeoutException, AssertionError) as e:
        raise Failed("%s: %s" % (step, e or "timed out"))


def signed_in(args, driver, sign_in, shown):
    def go():
        driver.get(args.url)
        sign_in(open(args.token_file).read().strip())
        shown("app")
    checked("signed in", go)
    print("ok: signed in")


def controls(args, driver, wait, sign_in, shown, row, api, daemon_file, notice, press, search_for, pin_from_search):
    slow = WebDriverWait(driver, 300, poll_frequency=0.2)
    signed_in(args, driver, sign_in, shown)

    # --damaged was stored before the page opened, then cut short on disk behind the daemon's back.
    step = "Verify checks a stored copy again and finds it damaged"
    def verify():
        wait.until(lambda d: (lambda r: r and r["state"] in ("complete", "unverified") and "verify" in r["buttons"])(row("files", args.damaged)))
        wait.until(lambda d: press("files", args.damaged, "button.verify"))
        wait.until(lambda d: daemon_file(args.damaged).get("state") == "failed")
        wait.until(lambda d: (lambda r: r and r["state"] == "failed" and "retry" in r["buttons"])(row("files", args.damaged)))
        assert "Checking again: " + args.damaged in notice(), notice()
    checked(step, verify)
    print("ok: " + step)

    step = "Retry fetches a failed file again"
    def retry():
        wait.until(lambda d: press("files", args.damaged, "button.retry"))
        slow.until(lambda d: daemon_file(args.damaged).get("state") in ("complete", "unverified"))
        wait.until(lambda d: (lambda r: r and r["state"] in ("complete", "unverified") and "retry" not in r["buttons"])(row("files", args.damaged)))
        assert "Tried again: " + args.damaged in notice(), notice()
    checked(step, retry)
    print("ok: " + step)

    step = "Pause stops a download the person pinned"
    def pause():
        pin_from_search(args.search_to_pause, args.to_pause)
        wait.until(lambda d: (lambda r: r and r["state"] in ("queued", "downloading") and "pause" in r["buttons"])(row("files", args.to_pause)))
        wait.until(lambda d: press("files", args.to_pause, "button.pause"))
        wait.until(lambda d: (lambda f: f.get("state") == "paused" and f.get("reason") == "paused_by_user")(daemon_file(args.to_pause)))
        wait.until(lambda d: (lambda r: r and r["state"] == "paused" and "Press Resume" in r["why"] and "resume" in r["buttons"]
                              and "pause" not in r["buttons"])(row("files", args.to_pause)))
        assert "Paused: " + args.to_pause in notice(), notice()
    checked(step, pause)
    print("ok: " + step)

    step = "Resume lets it go on, and it completes"
    def resume():
        wait.until(lambda d: press("files", args.to_pause, "button.resume"))
        wait.until(lambda d: daemon_file(args.to_pause).get("state") != "paused")
        slow.until(lambda d: daemon_file(args.to_pause).get("state") in ("complete", "unverified"))
        wait.until(lambda d: (lambda r: r and "verify" in r["buttons"] and "pause" not in r["buttons"])(row("files", args.to_pause)))
    checked(step, resume)
    print("ok: " + step)


    step = "a pin over the storage budget says so in words, and Retry shows the daemon's answer"
    def over_budget():
        pin_from_search(args.search_over_budget, args.over_budget)
        wait.until(lambda d: (lambda f: f.get("state") == "paused" and f.get("reason") == "over_budget")(daemon_file(args.over_budget)))
        wait.until(lambda d: (lambda r: r and r["reason"] == "over_budget" and "space Labstream may use" in r["why"] and "retry" in r["buttons"])(
            row("files", args.over_budget)))
        wait.until(lambda d: press("files", args.over_budget, "button.retry"))
        wait.until(lambda d: "There is still no room" in notice() and "parked again" in notice())
        assert args.over_budget in notice() and "over the storage budget" in notice(), notice()
        f = daemon_file(args.over_budget)
        assert f.get("state") == "paused" and f.get("reason") == "over_budget", f
    checked(step, over_budget)
    print("ok: " + step)

    step = "monitor a series from the search's results"
    def monitor():
        search_for(args.search_series)
        wait.until(lambda d: d.execute_script(
            "return [...document.querySelectorAll('#series li[data-series]')].some(e => e.dataset.series === arguments[0] && e.querySelector('select.mode'))",
            args.series))
        def choose():
            try:
                li = [e for e in driver.find_elements(By.CSS_SELECTOR, "#series li[data-series]") if e.get_attribute("data-series") == args.series]
                Select(li[0].find_element(By.CSS_SELECTOR, "select.mode")).select_by_value("latest-season")
                li[0].find_element(By.CSS_SELECTOR, "button.monitor").click()
                return True
            except (StaleElementReferenceException, NoSuchElementException, IndexError):
                return False
        wait.until(lambda d: choose())
        def monitored():
            return [(m.get("path"), m["mode"]) for m in api("GET", "/api/monitors")["monitors"]]
        wait.until(lambda d: monitored() == [(args.series, "latest-season")])
        # The monitor acts on the daemon: the latest season's episode is pinned.
        wait.until(lambda d: daemon_file(args.series_episode).get("pinned") is True)
        wait.until(lambda d: d.execute_script(
            "return [...document.querySelectorAll('#monitors li[data-path]')].some(e => e.dataset.path === arguments[0]"
            " && e.dataset.mode === 'latest-season' && e.textContent.includes('The latest season'))", args.series))
        wait.until(lambda d: d.execute_script(
            "return [...document.querySelectorAll('#series li[data-series]')].some(e => e.dataset.series === arguments[0]"
            " && e.textContent.includes('Monitored: The latest season'))", args.series))
    checked(step, monitor)
    print("ok: " + step)

    step = "stop monitoring it"
    def stop():
        wait.until(lambda d: press("monitors", args.series, "button.unmonitor"))
        wait.until(lambda d: api("GET", "/api/monitors")["monitors"] == [])
        wait.until(lambda d: d.find_element(By.ID, "nomonitors").is_displayed())
        assert "Stopped monitoring" in notice(), notice()
    checked(step, stop)
    print("ok: " + step)

    step = "usable at phone width"
    driver.set_window_size(390, 844)
    checked(step, lambda: wait.until(lambda d: d.execute_script("return window.innerWidth") <= 400))
    if not driver.execute_script("return document.documentElement.scrollWidth <= window.innerWidth"):
        raise Failed(step + ": the page scrolls sideways")
    print("ok: " + step)
    if args.screenshot:
        driver.save_screenshot(args.screenshot)


def trouble(args, driver, wait, sign_in, shown, row, api, daemon_file):
    signed_in(args, driver, sign_in, shown)

    def server_text():
        return driver.execute_script(
            "const li = [...document.querySelectorAll('#servers li')].find(e => e.dataset.server === arguments[0]);"
            "return li ? {reachability: li.dataset.reachability, events: li.dataset.events, text: li.textContent} : null;", args.server)

    if args.reachability == "offline":
        step = "a server that does not answer is said in words"
        checked(step, lambda: wait.until(lambda d: (lambda s: s and s["reachability"] == "offline" and "not answering" in s["text"]
                                                    and "It does not answer" in s["text"] and "go on by themselves" in s["text"])(server_text())))
        print("ok: " + step)
        return

    step = "a refused sign-in is said in words, with how to sign in again"
    def refused():
        row_ = [s for s in api("GET", "/api/status")["servers"] if s["name"] == args.server][0]
        assert row_["reachability"] == "auth-failed", row_
        wait.until(lambda d: (lambda s: s and s["reachability"] == "auth-failed" and "sign-in refused" in s["text"]
                              and "no longer accepts Labstream's sign-in" in s["text"] and row_["sign_in_again"] in s["text"])(server_text()))
        wait.until(lambda d: (lambda r: r and r["reason"] == "sign_in_refused" and "sign in again" in r["why"])(row("files", args.refused_file)))
    checked(step, refused)
    print("ok: " + step)

    step = "a lost event channel is said in words"
    def lost():
        row_ = wait.until(lambda d: (lambda r: r if r.get("events") == "lost" else False)(
            [s for s in api("GET", "/api/status")["servers"] if s["name"] == args.server][0]))
        wait.until(lambda d: (lambda s: s and s["events"] == "lost" and "Live updates from it were lost" in s["text"]
                              and row_["events_why"] in s["text"])(server_text()))
    checked(step, lost)
    print("ok: " + step)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--token-file", required=True)
    ap.add_argument("--scenario", choices=("progress", "controls", "trouble"), default="progress")
    ap.add_argument("--downloading")
    ap.add_argument("--to-pin")
    ap.add_argument("--search-downloading")
    ap.add_argument("--search-to-pin")
    # controls
    ap.add_argument("--damaged")
    ap.add_argument("--to-pause")
    ap.add_argument("--search-to-pause")
    ap.add_argument("--over-budget")
    ap.add_argument("--search-over-budget")
    ap.add_argument("--series")
    ap.add_argument("--search-series")
    ap.add_argument("--series-episode")
    # trouble
    ap.add_argument("--server")
    ap.add_argument("--refused-file")
    ap.add_argument("--reachability", choices=("auth-failed", "offline"), default="auth-failed")
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
                "if (!li) return null; const p = li.querySelector('progress'); const why = li.querySelector('.why');"
                "return {state: li.dataset.state, reason: li.dataset.reason, progress: p ? Number(p.value) : null,"
                " rate: li.querySelector('.rate') !== null, why: why ? why.textContent : '',"
                " buttons: [...li.querySelectorAll('button')].map(b => b.className)};",
                list_id, path)

        def api(method, path, body=None):
            data = json.dumps(body).encode() if body is not None else None
            headers = {"Authorization": "Bearer " + token}
            if data is not None:
                headers["Content-Type"] = "application/json"
            ask = urllib.request.Request(args.url.rstrip("/") + path, data=data, headers=headers, method=method)
            with urllib.request.urlopen(ask, timeout=30) as answer:
                return json.load(answer)

        # A file's status as the daemon tells it (GET /api/status?path=), not as the page draws it.
        def daemon_file(path):
            files = api("GET", "/api/status?path=" + urllib.parse.quote(path, safe=""))["files"]
            return files[0] if files else {}

        def notice():
            return driver.find_element(By.ID, "notice").text

        # The row is redrawn every second: a click that lands on a row just replaced is tried again.
        def press(list_id, path, css, attribute="data-path"):
            try:
                li = [e for e in driver.find_elements(By.CSS_SELECTOR, "#%s li[%s]" % (list_id, attribute)) if e.get_attribute(attribute) == path]
                if not li:
                    return False
                b = li[0].find_element(By.CSS_SELECTOR, css)
                if not b.is_enabled():
                    return False
                b.click()
                return True
            except (StaleElementReferenceException, NoSuchElementException):
                return False

        def search_for(words):
            box = driver.find_element(By.ID, "search")
            box.clear()
            box.send_keys(words)
            driver.find_element(By.CSS_SELECTOR, "#searchform button").click()

        def pin_from_search(words, path):
            search_for(words)
            wait.until(lambda d: (lambda r: r and r["state"] == "not-local")(row("results", path)))
            wait.until(lambda d: press("results", path, "button.pin"))

        if args.scenario == "controls":
            controls(args, driver, wait, sign_in, shown, row, api, daemon_file, notice, press, search_for, pin_from_search)
            return 0
        if args.scenario == "trouble":
            trouble(args, driver, wait, sign_in, shown, row, api, daemon_file)
            return 0

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
    except Failed as e:
        print("FAILED: %s" % e, file=sys.stderr)
        print(driver.find_element(By.TAG_NAME, "body").text, file=sys.stderr)
        return 1
    except (TimeoutException, AssertionError) as e:
        print("FAILED: %s: %s" % (step, e or "timed out"), file=sys.stderr)
        print(driver.find_element(By.TAG_NAME, "body").text, file=sys.stderr)
        return 1
    finally:
        driver.quit()
    return 0


if __name__ == "__main__":
    sys.exit(main())
