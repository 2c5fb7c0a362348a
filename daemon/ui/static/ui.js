// memoryd ui: the page's only script (served from /static; the CSP allows no inline script).
// 1. Drop ?token= from the address bar once the cookie holds it (the URL is no longer needed).
// 2. Search as you type: fetch /search/hits (server-rendered, escaped HTML) into #results.
// 3. Reload the dashboard every few seconds while the daemon is catching up.
// 4. File abstracts, fetched once the page is shown (each costs the daemon a read of the file): the file
//    page's line (server-rendered, escaped HTML), the access page's file lists and the entries page's
//    file rows (JSON, set as text).
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

  var abstract = document.getElementById("abstract");
  if (abstract && abstract.getAttribute("data-src")) {
    fetch(abstract.getAttribute("data-src"), { credentials: "same-origin" })
      .then(function (r) { if (!r.ok) { throw new Error("abstract: HTTP " + r.status); } return r.text(); })
      .then(function (html) { abstract.innerHTML = html; })  // escaped by the server, like the hits
      .catch(function () { /* the link to the abstract's own page stays */ });
  }
  Array.prototype.forEach.call(document.querySelectorAll("ul.files[data-abstracts]"), function (list) {
    fetch(list.getAttribute("data-abstracts"), { credentials: "same-origin" })
      .then(function (r) { if (!r.ok) { throw new Error("abstracts: HTTP " + r.status); } return r.json(); })
      .then(function (got) {
        Array.prototype.forEach.call(list.querySelectorAll("li[data-path]"), function (li) {
          var text = got.files[li.getAttribute("data-path")];
          if (!text) { return; }
          var span = document.createElement("span");
          span.className = "abstract";
          span.textContent = text;
          li.appendChild(span);
        });
        var note = list.nextElementSibling;
        if (note && note.classList.contains("abstracts-note") && got.note) {
          note.textContent = got.note;
          note.hidden = false;
        }
      })
      .catch(function () { /* the list stands without them */ });
  });

  var named = document.querySelectorAll("[data-abstract-path]");
  if (named.length) {
    var query = new URLSearchParams();
    Array.prototype.forEach.call(named, function (el) { query.append("path", el.getAttribute("data-abstract-path")); });
    fetch("/abstracts?" + query.toString(), { credentials: "same-origin" })
      .then(function (r) { if (!r.ok) { throw new Error("abstracts: HTTP " + r.status); } return r.json(); })
      .then(function (got) {
        Array.prototype.forEach.call(named, function (el) {
          var text = got.files[el.getAttribute("data-abstract-path")];
          if (text) { el.textContent = text; }
        });
      })
      .catch(function () { /* the page stands without them */ });
  }

  var refresh = document.body.getAttribute("data-refresh");
  if (refresh) {
    setTimeout(function () { window.location.reload(); }, Number(refresh) * 1000);
  }
})();
