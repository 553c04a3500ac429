// Meridian dashboard: live refresh of the page's #live region, confirm
// prompts and select-all. No framework; loaded as an external file so the
// Content-Security-Policy can forbid inline script.
(function () {
  "use strict";

  var body = document.body;
  var interval = parseInt(body.getAttribute("data-refresh"), 10) || 0;

  // Drop a flash message from the address bar so a reload does not repeat it.
  if (window.history && window.history.replaceState && /[?&]flash=/.test(location.search)) {
    var u = new URL(location.href);
    u.searchParams.delete("flash");
    u.searchParams.delete("n");
    window.history.replaceState(null, "", u.toString());
  }

  // busy reports whether swapping the region now would lose the user's work:
  // a checked box, a focused control inside it.
  function busy(region) {
    if (region.querySelector("input[type=checkbox]:checked")) return true;
    var a = document.activeElement;
    return a && a !== body && region.contains(a) && a.tagName !== "A";
  }

  var inFlight = false;
  function refresh() {
    var region = document.getElementById("live");
    if (!region || document.hidden || inFlight || busy(region)) return;
    inFlight = true;
    fetch(location.href, {
      headers: { "X-Meridian-Partial": "1" },
      credentials: "same-origin",
      cache: "no-store"
    }).then(function (res) {
      if (!res.ok) throw new Error("refresh: " + res.status);
      return res.text();
    }).then(function (html) {
      // Swap only when something changed, and only if the user has not
      // started working in the region meanwhile.
      if (html !== region.innerHTML && !busy(region)) region.innerHTML = html;
      body.classList.remove("stale");
    }).catch(function () {
      body.classList.add("stale");
    }).then(function () {
      inFlight = false;
    });
  }
  if (interval > 0) window.setInterval(refresh, interval);

  // Delegated handlers keep working after the region is swapped.
  document.addEventListener("submit", function (e) {
    var btn = e.submitter;
    var msg = (btn && btn.getAttribute("data-confirm")) || e.target.getAttribute("data-confirm");
    if (msg && !window.confirm(msg)) e.preventDefault();
  });
  document.addEventListener("change", function (e) {
    var t = e.target;
    if (t.hasAttribute && t.hasAttribute("data-select-all")) {
      var boxes = document.querySelectorAll("input[type=checkbox][name=id]");
      for (var i = 0; i < boxes.length; i++) boxes[i].checked = t.checked;
    }
  });
})();
