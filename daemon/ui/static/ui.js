// memoryd ui: the page's only script (served from /static; the CSP allows no inline script).
// 1. Drop ?token= from the address bar once the cookie holds it (the URL is no longer needed).
// 2. Search as you type: fetch /search/hits (server-rendered, escaped HTML) into #results.
// 3. Reload the dashboard every few seconds while the daemon is catching up.
"use strict";
(function () {
  var url = new URL(window.location.href);
  if (url.searchParams.has("token")) {
    url.searchParams.delete("token");
    window.history.replaceState(null, "", url.pathname + url.search + url.hash);
  }

  var form = document.getElementById("search-form");
  var results = document.getElementById("results");
  if (form && results) {
    var timer = null;
    var pending = null;
    var run = function () {
      var params = new URLSearchParams(new FormData(form));
      if (pending) { pending.abort(); }
      pending = new AbortController();
      fetch("/search/hits?" + params.toString(), { credentials: "same-origin", signal: pending.signal })
        .then(function (r) { return r.text(); })
        .then(function (html) {
          results.innerHTML = html;  // escaped by the server; the CSP keeps any script from running
          window.history.replaceState(null, "", "/search?" + params.toString());
        })
        .catch(function (e) { if (e.name !== "AbortError") { results.textContent = String(e); } });
    };
    form.addEventListener("input", function () {
      clearTimeout(timer);
      timer = setTimeout(run, 150);
    });
    form.addEventListener("submit", function (e) { e.preventDefault(); clearTimeout(timer); run(); });
  }

  var refresh = document.body.getAttribute("data-refresh");
  if (refresh) {
    setTimeout(function () { window.location.reload(); }, Number(refresh) * 1000);
  }
})();
