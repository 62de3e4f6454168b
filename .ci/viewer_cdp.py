#!/usr/bin/env python3
"""Drive the memory viewer like a user, in headless Chromium (stdlib only).

    viewer_cdp.py BROWSER SNAPSHOT.json REPORT.html VIEWER.html OUT_DIR [--site TEXT]

Speaks the DevTools protocol over --remote-debugging-pipe (file
descriptors 3 and 4, NUL-separated JSON) and sends real input events:
  1. in REPORT.html (SNAPSHOT.json embedded): a click on the timeline moves
     the time cursor, and a drag moves it further right; at each position
     the live blocks the page lists (count and bytes) must equal those
     viewer_check.live_at computes from the snapshot for the event index
     the page shows; hovering shows the readout;
  2. in the empty VIEWER.html: SNAPSHOT.json dropped on the page (drag and
     drop of a file) and, in a fresh page, chosen with the file picker,
     must each load and show the snapshot's peak bytes;
  3. back in REPORT.html, when the snapshot has stacks: a click on a live
     block (the first whose site contains TEXT, with --site; else the
     first with a stack) shows its whole stack: one line per frame of the
     block's stack in the snapshot, the site's frame marked and equal to
     the row's site, each host frame (Python's) tagged; a second click
     hides it; the same for the first site of the small long-lived blocks.
Saves cursor.png (after the drag, with the readout) and, for step 3,
stack.png (the whole page, the stack open) in OUT_DIR.
"""

import base64
import fcntl
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import viewer_check  # noqa: E402


class Browser:
    def __init__(self, browser, profile):
        to_child_r, self.to_child = os.pipe()
        self.from_child, from_child_w = os.pipe()
        # The child's ends, moved to 10 and up so that the shell's
        # redirections onto 3 and 4 cannot close them.
        for name in ("to_child_r", "from_child_w"):
            fd = locals()[name]
            high = fcntl.fcntl(fd, fcntl.F_DUPFD, 10)
            os.close(fd)
            if name == "to_child_r":
                to_child_r = high
            else:
                from_child_w = high
        args = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--hide-scrollbars", "--user-data-dir=" + profile, "--remote-debugging-pipe", "about:blank"]
        wrapper = 'exec 3<&%d 4>&%d %d<&- %d>&-; exec "$0" "$@"' % (to_child_r, from_child_w, to_child_r, from_child_w)
        self.proc = subprocess.Popen(["bash", "-c", wrapper, browser] + args, pass_fds=(to_child_r, from_child_w),
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_child_r)
        os.close(from_child_w)
        self.buf = b""
        self.next_id = 0

    def send(self, method, params=None, session=None, timeout=60):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self.to_child, json.dumps(msg).encode() + b"\0")
        deadline = time.time() + timeout
        while True:
            while b"\0" in self.buf:
                raw, self.buf = self.buf.split(b"\0", 1)
                reply = json.loads(raw)
                if reply.get("id") == self.next_id:
                    if "error" in reply:
                        raise RuntimeError("%s: %s" % (method, reply["error"]))
                    return reply.get("result", {})
            if time.time() > deadline:
                raise TimeoutError(method)
            chunk = os.read(self.from_child, 1 << 20)
            if not chunk:
                raise RuntimeError("the browser closed the pipe during " + method)
            self.buf += chunk

    def page(self, url):
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        s = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": 1400, "height": 1000, "deviceScaleFactor": 1, "mobile": False}, s)
        self.send("Page.enable", {}, s)
        self.send("Page.navigate", {"url": url}, s)
        return Page(self, s)

    def close(self):
        try:
            self.send("Browser.close", timeout=10)
        except Exception:
            pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


class Page:
    def __init__(self, browser, session):
        self.b, self.s = browser, session

    def js(self, expr):
        r = self.b.send("Runtime.evaluate", {"expression": expr, "returnByValue": True, "awaitPromise": True}, self.s)
        if "exceptionDetails" in r:
            raise RuntimeError("page script failed: %s" % r["exceptionDetails"])
        return r["result"].get("value")

    def test(self, name):
        return self.js('document.querySelector(\'[data-testid="%s"]\').textContent' % name)

    def wait_status(self, want, timeout=60):
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                st = self.test("status")
            except RuntimeError:
                st = None
            if st == want:
                return
            if st == "error":
                raise AssertionError("the page shows an error: %s" % self.test("error"))
            time.sleep(0.1)
        raise TimeoutError("page status never became %r" % want)

    def mouse(self, kind, x, y, buttons=0):
        self.b.send("Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y, "button": "left" if kind != "mouseMoved" or buttons else "none",
                                                 "buttons": buttons, "clickCount": 1 if kind != "mouseMoved" else 0}, self.s)

    def screenshot(self, path):
        data = self.b.send("Page.captureScreenshot", {"format": "png"}, self.s)["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))


failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def cursor_matches(page, snap, label):
    k = int(page.test("cursor-event"))
    live = viewer_check.live_at(snap, k)
    count, nbytes = int(page.test("cursor-live-blocks")), int(page.test("cursor-live-bytes"))
    want_bytes = viewer_check.outer_bytes(snap, live)
    check(count == len(live) and nbytes == want_bytes,
          "%s: cursor after event %d: page lists %d blocks / %d B, snapshot has %d / %d B"
          % (label, k, count, nbytes, len(live), want_bytes))
    return k


def block_stack(snap, k, allocator, addr):
    """The stack of the block `allocator` (the page's label: its name) has
    at `addr` when k events are applied: its last alloc event before k,
    else the live block's own."""
    found = None
    for i, e in enumerate(snap["events"][:k]):
        if e["action"] == "alloc" and e["allocator"] == allocator and int(e["addr"], 16) == int(addr, 16):
            found = e.get("stack")
    if found is None:
        for a in snap["allocators"]:
            for b in a["blocks"]:
                if a["name"] == allocator and int(b["addr"], 16) == int(addr, 16):
                    found = b.get("stack")
    return found or []


def stack_on_demand(p, snap, site_text, out):
    """Step 3 (see the module's comment)."""
    rows = p.js("""(() => [...document.querySelectorAll('#blocks tr[data-testid="block-row"]')].map((r, i) => {
        const c = r.children; return [i, c[0].textContent, c[1].textContent, c[3].textContent]; }))()""")
    if site_text:
        rows = [r for r in rows if site_text in r[3]]
    check(bool(rows), "a live block with a stack%s is listed" % (" at %r" % site_text if site_text else ""))
    if not rows:
        return
    i, allocator, addr, site = rows[0]
    allocator = allocator.split(" in ")[0]

    def click(selector, index):
        x, y = p.js("""(() => { const r = document.querySelectorAll('%s')[%d];
            r.scrollIntoView({block: 'center'}); const b = r.getBoundingClientRect();
            return [b.left + 40, b.top + b.height / 2]; })()""" % (selector, index))
        p.mouse("mouseMoved", x, y)
        p.mouse("mousePressed", x, y, 1)
        p.mouse("mouseReleased", x, y)

    click('#blocks tr[data-testid="block-row"]', i)
    shown = p.js("""(() => { const s = document.querySelector('#blocks tr[data-testid="stack"]'); if (!s) return null;
        return [s.querySelectorAll('li').length, s.querySelectorAll('li .host').length,
                (s.querySelector('li.site .fn') || {}).textContent || '', s.querySelector('li.site') ? s.querySelector('li.site').textContent : '',
                [...s.querySelectorAll('li')].map(l => l.textContent).join('\\n')]; })()""")
    stack = block_stack(snap, int(p.test("cursor-event")), allocator, addr)
    frames = [snap["frames"][j] for j in stack]
    check(shown is not None and shown[0] == len(stack),
          "a click on the block at %s shows its whole stack: %s lines, %d frames in the snapshot"
          % (addr, shown and shown[0], len(stack)))
    if shown is None:
        return
    hosts = sum(1 for f in frames if f.get("host"))
    check(shown[1] == hosts, "its %d host frames are tagged (%d tags)" % (hosts, shown[1]))
    check(bool(shown[2]) and site.startswith(shown[2]), "the marked frame %r is the row's site %r" % (shown[2], site))
    if site_text:
        check(site_text in shown[4], "the stack shows %r" % site_text)
    # The photograph: the page from the top, the block's row at the top of
    # its table's scroll box, its stack below it.
    p.js("""(() => { window.scrollTo(0, 0); const box = document.getElementById('blocks');
        const row = document.querySelector('#blocks tr[data-testid="stack"]').previousElementSibling;
        box.scrollTop += row.getBoundingClientRect().top - box.getBoundingClientRect().top - 30; })()""")
    height = p.js("Math.ceil(document.documentElement.scrollHeight)")
    b = p.b
    b.send("Emulation.setDeviceMetricsOverride", {"width": 1400, "height": height, "deviceScaleFactor": 1, "mobile": False}, p.s)
    time.sleep(0.3)
    p.screenshot(os.path.join(out, "stack.png"))
    b.send("Emulation.setDeviceMetricsOverride", {"width": 1400, "height": 1000, "deviceScaleFactor": 1, "mobile": False}, p.s)
    click('#blocks tr[data-testid="block-row"]', i)
    check(p.js("""document.querySelector('#blocks tr[data-testid="stack"]') === null"""), "a second click hides it")
    small = p.js("""document.querySelectorAll('#small-live tr.has-stack').length""")
    if small:
        click('#small-live tr.has-stack', 0)
        n = p.js("""(() => { const s = document.querySelector('#small-live tr[data-testid="stack"]'); return s ? s.querySelectorAll('li').length : 0; })()""")
        check(n > 0, "a click on a small long-lived site shows its stack (%d frames)" % n)


def main():
    args = sys.argv[1:]
    site_text = None
    if "--site" in args:
        i = args.index("--site")
        site_text = args[i + 1]
        del args[i:i + 2]
    browser, snap_path, report, viewer, out = args[:5]
    snap = json.load(open(snap_path))
    want_peak = str(viewer_check.expect(snap)["peak-bytes"])
    with tempfile.TemporaryDirectory() as profile:
        b = Browser(browser, profile)
        try:
            # 1. the time cursor: click, then drag, on the timeline.
            p = b.page("file://" + os.path.abspath(report))
            p.wait_status("ok")
            peak_k = cursor_matches(p, snap, "at load (the peak)")
            r = p.js("(() => { const r = document.getElementById('chart').getBoundingClientRect();"
                     " window.scrollTo(0, 0); return [r.left, r.top, r.width, r.height]; })()")
            left, top, width, height = r
            y = top + height / 2
            x1, x2 = left + 74 + (width - 92) * 0.2, left + 74 + (width - 92) * 0.6
            p.mouse("mouseMoved", x1, y)
            p.mouse("mousePressed", x1, y, 1)
            p.mouse("mouseReleased", x1, y)
            k1 = cursor_matches(p, snap, "after a click at 20% of the timeline")
            check(k1 != peak_k and 0 < k1 < len(snap["events"]), "the click moved the cursor (event %d -> %d)" % (peak_k, k1))
            p.mouse("mousePressed", x1, y, 1)
            for i in range(1, 11):
                p.mouse("mouseMoved", x1 + (x2 - x1) * i / 10, y, 1)
            p.mouse("mouseReleased", x2, y)
            k2 = cursor_matches(p, snap, "after a drag to 60%")
            check(k2 > k1, "the drag moved the cursor right (event %d -> %d)" % (k1, k2))
            print("     moving the cursor took %s ms in the page (%d events)" % (p.test("cursor-ms"), len(snap["events"])))
            p.mouse("mouseMoved", x2 + 30, y)
            tip = p.js("(() => { const t = document.querySelector('.tip'); return t.style.display + '|' + t.textContent; })()")
            check(tip.startswith("block|") and "total" in tip, "hovering shows the readout: %r" % tip[:90])
            p.screenshot(os.path.join(out, "cursor.png"))
            # 2. a file dropped on the empty viewer.
            url = "file://" + os.path.abspath(viewer)
            p = b.page(url)
            p.wait_status("waiting")
            data = {"items": [], "files": [os.path.abspath(snap_path)], "dragOperationsMask": 1}
            for kind in ("dragEnter", "dragOver", "drop"):
                b.send("Input.dispatchDragEvent", {"type": kind, "x": 700, "y": 400, "data": data}, p.s)
            p.wait_status("ok")
            check(p.test("peak-bytes") == want_peak, "drag and drop: peak %s B on the page, %s in the file" % (p.test("peak-bytes"), want_peak))
            # 3. the file picker.
            p = b.page(url)
            p.wait_status("waiting")
            b.send("DOM.enable", {}, p.s)
            doc = b.send("DOM.getDocument", {}, p.s)["root"]["nodeId"]
            node = b.send("DOM.querySelector", {"nodeId": doc, "selector": "#file"}, p.s)["nodeId"]
            b.send("DOM.setFileInputFiles", {"nodeId": node, "files": [os.path.abspath(snap_path)]}, p.s)
            p.wait_status("ok")
            check(p.test("peak-bytes") == want_peak, "file picker: peak %s B on the page, %s in the file" % (p.test("peak-bytes"), want_peak))
            # 4. the whole stack of a block, on demand.
            if snap["frames"]:
                p = b.page("file://" + os.path.abspath(report))
                p.wait_status("ok")
                stack_on_demand(p, snap, site_text, out)
        finally:
            b.close()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
