// onceflow console: live regions and JSON editors. No inline script anywhere: the
// Content-Security-Policy admits only this file.
(function () {
  "use strict";

  // Live regions: an element with data-live="URL" and data-poll is refreshed from URL
  // every two seconds while the page is visible, until the fragment carries
  // [data-settled] (nothing left that moves without a person). With data-live-from="ID"
  // the answer is a whole page and the element of that id in it is taken (the runs and
  // review lists, which never settle). A region where the person has changed a form
  // control is left alone until the change is submitted or undone. A status line after
  // the region says when updates stop or falter: signed out (401), the connection lost
  // (retried, more slowly), or an error answer (retried).
  function poll(el) {
    var url = el.getAttribute("data-live");
    var from = el.getAttribute("data-live-from");
    var last = el.innerHTML;
    var failures = 0;
    var status = document.createElement("p");
    status.className = "livestatus";
    status.setAttribute("role", "status");
    status.setAttribute("aria-live", "polite");
    el.insertAdjacentElement("afterend", status);
    function say(text, kind) {
      status.textContent = text;
      status.className = "livestatus" + (kind ? " " + kind : "");
    }
    function edited() {
      return Array.prototype.some.call(el.querySelectorAll("input, select, textarea"), function (c) {
        if (c.type === "checkbox" || c.type === "radio") { return c.checked !== c.defaultChecked; }
        if (c.tagName === "SELECT") {
          return Array.prototype.some.call(c.options, function (o) { return o.selected !== o.defaultSelected; });
        }
        return c.value !== c.defaultValue;
      });
    }
    function take(html) {
      if (!from) { return html; }
      var doc = new DOMParser().parseFromString(html, "text/html");
      var part = doc.getElementById(from);
      return part ? part.innerHTML : null;
    }
    function tick() {
      if (document.hidden || edited()) { schedule(2000); return; }
      fetch(url, { credentials: "same-origin", headers: { "Accept": "text/html" }, redirect: "error" })
        .then(function (r) {
          if (r.status === 401) {
            el.removeAttribute("data-poll");
            say("Signed out: this part of the page no longer updates. Reload to sign in again.", "stopped");
            return undefined;
          }
          if (!r.ok) {
            failures++;
            say("The server answered " + r.status + "; retrying.", "faltering");
            schedule(backoff());
            return undefined;
          }
          return r.text().then(function (html) {
            failures = 0;
            say("", "");
            html = take(html);
            if (html !== null && html !== last) {
              el.innerHTML = html;
              last = el.innerHTML;
              localize(el);
            }
            if (el.querySelector("[data-settled]")) { el.removeAttribute("data-poll"); return; }
            schedule(2000);
          });
        })
        .catch(function () {
          failures++;
          say("Connection lost, retrying.", "faltering");
          schedule(backoff());
        });
    }
    function backoff() { return Math.min(2000 * Math.pow(2, failures), 30000); }
    function schedule(ms) { setTimeout(tick, ms); }
    schedule(2000);
  }

  // Times: the server writes each as <time class="at" datetime="…Z"> with UTC as its
  // text; shown here in the viewer's zone, the UTC text kept on hover.
  function pad(n) { return (n < 10 ? "0" : "") + n; }
  function zoneName(d) {
    try {
      var parts = new Intl.DateTimeFormat(undefined, { timeZoneName: "short" }).formatToParts(d);
      for (var i = 0; i < parts.length; i++) {
        if (parts[i].type === "timeZoneName") { return parts[i].value; }
      }
    } catch (e) { /* an old browser: the offset below */ }
    var off = -d.getTimezoneOffset();
    return "UTC" + (off < 0 ? "-" : "+") + pad(Math.floor(Math.abs(off) / 60)) + ":" + pad(Math.abs(off) % 60);
  }
  function localize(root) {
    root.querySelectorAll("time.at[datetime]").forEach(function (t) {
      var d = new Date(t.getAttribute("datetime"));
      if (isNaN(d.getTime())) { return; }
      t.textContent = d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + " " +
        pad(d.getHours()) + ":" + pad(d.getMinutes()) + ":" + pad(d.getSeconds()) + " " + zoneName(d);
    });
  }

  // JSON editors: say at once whether the text is valid JSON, block the form while it is
  // not, and indent it when the field is left.
  function editor(ta) {
    var status = ta.nextElementSibling && ta.nextElementSibling.classList.contains("jsonstatus") ? ta.nextElementSibling : null;
    function check() {
      var v = ta.value.trim();
      if (v === "") { ta.setCustomValidity(""); if (status) { status.textContent = ""; } return null; }
      try {
        var parsed = JSON.parse(v);
        ta.setCustomValidity("");
        if (status) { status.textContent = "valid JSON"; status.className = "jsonstatus ok"; }
        return parsed;
      } catch (e) {
        ta.setCustomValidity("not valid JSON: " + e.message);
        if (status) { status.textContent = "not valid JSON: " + e.message; status.className = "jsonstatus bad"; }
        return undefined;
      }
    }
    ta.addEventListener("input", check);
    ta.addEventListener("blur", function () {
      var v = check();
      if (v !== null && v !== undefined && typeof v === "object" && Object.keys(v).length > 0) {
        ta.value = JSON.stringify(v, null, 2);
      }
    });
    check();
  }

  // A replay preview ([data-previewed], holding the correction it was computed for) is
  // stale as soon as the correction box says something else: it says so, and its Confirm
  // is disabled until the person previews again. The server refuses a stale confirmation
  // all the same (its plan digest differs); this only keeps the button from inviting it.
  function previewGuard(section) {
    var box = document.getElementById("merge_patch");
    var confirm = document.getElementById("confirm");
    var note = document.getElementById("stale");
    if (!box || !confirm) { return; }
    function canonical(text) {
      var v = text.trim();
      try { return JSON.stringify(JSON.parse(v)); } catch (e) { return v; }
    }
    var previewed = canonical(section.getAttribute("data-previewed") || "");
    var wasDisabled = confirm.disabled;
    function check() {
      var stale = canonical(box.value) !== previewed;
      section.classList.toggle("stale", stale);
      if (note) { note.hidden = !stale; }
      confirm.disabled = wasDisabled || stale;
    }
    box.addEventListener("input", check);
    box.addEventListener("change", check);
    check();
  }

  document.addEventListener("DOMContentLoaded", function () {
    localize(document);
    document.querySelectorAll("[data-live][data-poll]").forEach(poll);
    document.querySelectorAll("textarea.jsonedit").forEach(editor);
    // A replay preview is an answer to the person's own click: show it, not the top of
    // the page it came back on.
    var preview = document.getElementById("preview-result");
    if (preview) { preview.scrollIntoView({ block: "start" }); }
    document.querySelectorAll("[data-previewed]").forEach(previewGuard);
  });
})();
