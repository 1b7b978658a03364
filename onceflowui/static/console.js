// onceflow console: live regions and JSON editors. No inline script anywhere: the
// Content-Security-Policy admits only this file.
(function () {
  "use strict";

  // Live regions: an element with data-live="URL" and data-poll is refreshed from URL
  // every two seconds while the page is visible, until the fragment carries
  // [data-settled] (nothing left that moves without a person).
  function poll(el) {
    var url = el.getAttribute("data-live");
    var last = el.innerHTML;
    var timer = null;
    function tick() {
      if (document.hidden) { schedule(); return; }
      fetch(url, { credentials: "same-origin", headers: { "Accept": "text/html" } })
        .then(function (r) {
          if (r.status === 401) { throw new Error("signed out"); }
          return r.ok ? r.text() : null;
        })
        .then(function (html) {
          if (html !== null && html !== last) {
            el.innerHTML = html;
            last = el.innerHTML;
          }
          if (el.querySelector("[data-settled]")) { el.removeAttribute("data-poll"); return; }
          schedule();
        })
        .catch(function () { el.removeAttribute("data-poll"); });
    }
    function schedule() { timer = setTimeout(tick, 2000); }
    schedule();
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
    document.querySelectorAll("[data-live][data-poll]").forEach(poll);
    document.querySelectorAll("textarea.jsonedit").forEach(editor);
    document.querySelectorAll("[data-previewed]").forEach(previewGuard);
  });
})();
