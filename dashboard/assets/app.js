// Meridian dashboard: live refresh of the page's #live region (confirm
// prompts and select-all are forms.js's). No framework; loaded as an
// external file so the Content-Security-Policy can forbid inline script.
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

  // busy reports whether updating the region now would lose the user's
  // work: a checked box, a focused control, or text selected in it (to
  // copy an ID or an error).
  function busy(region) {
    if (region.querySelector("input[type=checkbox]:checked")) return true;
    var a = document.activeElement;
    if (a && a !== body && region.contains(a) && a.tagName !== "A") return true;
    var sel = window.getSelection && window.getSelection();
    return !!(sel && !sel.isCollapsed && sel.anchorNode && region.contains(sel.anchorNode));
  }

  // morph updates the live node from to match the new node to in place:
  // nodes that did not change are kept, so nothing flickers, and hover,
  // scroll positions and open tooltips survive a refresh. A node whose
  // kind changed is replaced.
  function morph(from, to) {
    if (from.nodeType !== to.nodeType || from.nodeName !== to.nodeName) {
      from.parentNode.replaceChild(to, from);
      return;
    }
    if (from.nodeType === 3 || from.nodeType === 8) {
      if (from.nodeValue !== to.nodeValue) from.nodeValue = to.nodeValue;
      return;
    }
    if (from.nodeType !== 1) return;
    var i, at = to.attributes, fa = from.attributes;
    for (i = 0; i < at.length; i++) {
      if (from.getAttribute(at[i].name) !== at[i].value) from.setAttribute(at[i].name, at[i].value);
    }
    for (i = fa.length - 1; i >= 0; i--) {
      if (!to.hasAttribute(fa[i].name)) from.removeAttribute(fa[i].name);
    }
    var fc = Array.prototype.slice.call(from.childNodes);
    var tc = Array.prototype.slice.call(to.childNodes);
    for (i = 0; i < tc.length; i++) {
      if (i < fc.length) morph(fc[i], tc[i]);
      else from.appendChild(tc[i]);
    }
    for (i = tc.length; i < fc.length; i++) from.removeChild(fc[i]);
  }

  var inFlight = false;
  var last = null; // the region's HTML as the server last sent it
  function refresh() {
    var region = document.getElementById("live");
    if (!region || document.hidden || inFlight || busy(region)) return;
    inFlight = true;
    fetch(location.href, {
      headers: { "X-Meridian-Partial": "1" },
      credentials: "same-origin",
      cache: "no-store"
    }).then(function (res) {
      // A 404 page means what this page showed is gone (a job that
      // finished and was deleted): show the server's explanation and stop.
      if (res.status === 404 && /^text\/html/.test(res.headers.get("Content-Type") || "")) {
        window.clearInterval(timer);
        return res.text();
      }
      if (!res.ok) throw new Error("refresh: " + res.status);
      return res.text();
    }).then(function (html) {
      // Update only when something changed, and only if the user has not
      // started working in the region meanwhile.
      if (html !== last && !busy(region)) {
        var t = document.createElement("template");
        t.innerHTML = html;
        var next = document.createElement("div");
        next.appendChild(t.content);
        localTimes(next);
        morph(region, copyAttrs(region, next));
        last = html;
      }
      body.classList.remove("stale");
    }).catch(function () {
      body.classList.add("stale");
    }).then(function () {
      inFlight = false;
    });
  }

  // copyAttrs gives the new region the live region's own attributes, so
  // that morph updates only the content.
  function copyAttrs(from, to) {
    for (var i = 0; i < from.attributes.length; i++) to.setAttribute(from.attributes[i].name, from.attributes[i].value);
    return to;
  }
  var timer = interval > 0 ? window.setInterval(refresh, interval) : 0;

  // Times come from the server in UTC (the title keeps that); show them
  // in the reader's own time zone.
  function localTimes(root) {
    var ts = root.querySelectorAll("time[datetime]");
    for (var i = 0; i < ts.length; i++) {
      var d = new Date(ts[i].getAttribute("datetime"));
      if (isNaN(d.getTime())) continue;
      // A clock (a page's "read at") shows the time of day only.
      var s = ts[i].classList.contains("clock")
        ? d.toLocaleTimeString(undefined, { hour: "2-digit", minute: "2-digit", second: "2-digit", timeZoneName: "short" })
        : d.toLocaleString(undefined, { year: "numeric", month: "short", day: "numeric", hour: "2-digit", minute: "2-digit", second: "2-digit", timeZoneName: "short" });
      if (ts[i].textContent !== s) ts[i].textContent = s;
    }
  }
  localTimes(document);
})();
