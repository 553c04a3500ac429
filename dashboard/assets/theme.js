// Meridian dashboard: the theme. Loaded in <head> without defer so the
// chosen theme applies before the first paint (no light flash on a dark
// page). The choice is the system's (prefers-color-scheme) until the user
// picks one with the sidebar's toggle; that choice is kept in localStorage.
(function () {
  "use strict";
  var root = document.documentElement;
  var key = "meridian-theme";
  function stored() {
    try { return window.localStorage.getItem(key); } catch (e) { return null; }
  }
  function dark() {
    var t = root.getAttribute("data-theme");
    if (t) return t === "dark";
    return !!(window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches);
  }
  var t = stored();
  if (t === "dark" || t === "light") root.setAttribute("data-theme", t);

  function label(btn) {
    var d = dark();
    btn.setAttribute("aria-pressed", d ? "true" : "false");
    btn.textContent = d ? "Light theme" : "Dark theme";
  }
  document.addEventListener("DOMContentLoaded", function () {
    var btn = document.getElementById("theme-toggle");
    if (!btn) return;
    label(btn);
    btn.addEventListener("click", function () {
      var next = dark() ? "light" : "dark";
      root.setAttribute("data-theme", next);
      try { window.localStorage.setItem(key, next); } catch (e) { /* private mode: this page only */ }
      label(btn);
    });
  });
})();
