// overt cockpit: keyboard shortcuts. A plain file (the CSP allows scripts from
// this origin only, and no inline script): j/k move between the turns of a
// session (or the requests on Approvals), a approves the focused (or only)
// request after a confirmation, ? lists the shortcuts. Nothing happens while
// typing in a field, or with Ctrl, Alt or Meta held.
(function () {
  "use strict";
  var ITEMS = "section.turn-log, article.request";
  var focusedRequest = null;

  function typing(el) {
    if (!el) { return false; }
    var tag = el.tagName;
    return tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT" || el.isContentEditable;
  }

  function items() { return Array.prototype.slice.call(document.querySelectorAll(ITEMS)); }

  function current(list) {
    var active = document.activeElement;
    for (var i = 0; i < list.length; i++) {
      if (list[i] === active || list[i].contains(active)) { return i; }
    }
    return -1;
  }

  function move(step) {
    var list = items();
    if (!list.length) { return; }
    var at = current(list);
    var next = at < 0 ? (step > 0 ? 0 : list.length - 1)
                      : Math.min(Math.max(at + step, 0), list.length - 1);
    var el = list[next];
    if (!el.hasAttribute("tabindex")) { el.setAttribute("tabindex", "-1"); }
    el.focus();
    el.scrollIntoView({block: "start"});
  }

  function dialog(id, title) {
    var d = document.getElementById(id);
    if (d) { return d; }
    d = document.createElement("dialog");
    d.id = id;
    d.className = "keys-dialog";
    d.setAttribute("aria-labelledby", id + "-h");
    var h = document.createElement("h2");
    h.id = id + "-h";
    h.textContent = title;
    d.appendChild(h);
    document.body.appendChild(d);
    return d;
  }

  function button(text, cls, onClick) {
    var b = document.createElement("button");
    b.type = "button";
    b.textContent = text;
    b.className = cls;
    b.addEventListener("click", onClick);
    return b;
  }

  function help() {
    var d = document.getElementById("keys-help");
    if (d && d.open) { d.close(); return; }
    d = dialog("keys-help", "Keyboard shortcuts");
    if (!d.querySelector("dl")) {
      var dl = document.createElement("dl");
      [["j", "next turn (next request on Approvals)"],
       ["k", "previous turn (previous request)"],
       ["a", "approve the focused request, or the only one, after a confirmation"],
       ["?", "show or hide this list"],
       ["Esc", "close"]].forEach(function (pair) {
        var dt = document.createElement("dt");
        var kbd = document.createElement("kbd");
        kbd.textContent = pair[0];
        dt.appendChild(kbd);
        var dd = document.createElement("dd");
        dd.textContent = pair[1];
        dl.appendChild(dt);
        dl.appendChild(dd);
      });
      d.appendChild(dl);
      d.appendChild(button("Close", "keys-close", function () { d.close(); }));
    }
    d.showModal();
  }

  function say(text) {
    var d = dialog("keys-note", "Approve");
    var p = d.querySelector("p") || d.appendChild(document.createElement("p"));
    p.textContent = text;
    if (!d.querySelector("button")) {
      d.appendChild(button("Close", "keys-close", function () { d.close(); }));
    }
    d.showModal();
  }

  function approve() {
    var requests = Array.prototype.slice.call(document.querySelectorAll("article.request"));
    if (!requests.length) { return; }
    var at = current(requests);
    var card = at >= 0 ? requests[at] : (requests.length === 1 ? requests[0] : null);
    if (!card) {
      say(requests.length + " requests wait: move to one with j or k first, then press a.");
      return;
    }
    var yes = card.querySelector("button.approve");
    if (!yes) {
      var why = document.getElementById("no-decide");
      say(why ? why.textContent : "You may not decide this request.");
      return;
    }
    var d = document.getElementById("keys-confirm");
    if (d) { d.remove(); }
    d = dialog("keys-confirm", "Approve this call?");
    var p = document.createElement("p");
    p.textContent = yes.dataset.confirm || "Approve this request?";
    d.appendChild(p);
    var row = document.createElement("p");
    row.className = "keys-buttons";
    row.appendChild(button("Approve", "approve keys-yes", function () { d.close(); yes.click(); }));
    row.appendChild(button("Cancel", "keys-no", function () { d.close(); }));
    d.appendChild(row);
    d.showModal();
    d.querySelector(".keys-no").focus();  // Enter alone does not approve
  }

  // the Approvals list is pushed again over SSE: the card that had the focus keeps it
  document.addEventListener("htmx:beforeSwap", function () {
    var active = document.activeElement;
    var card = active && active.closest ? active.closest("article.request") : null;
    focusedRequest = card && card === active ? card.dataset.request : null;
  });
  document.addEventListener("htmx:afterSwap", function () {
    if (!focusedRequest || document.activeElement !== document.body) { return; }
    var again = document.querySelector('article.request[data-request="' +
                                       CSS.escape(focusedRequest) + '"]');
    if (again) { again.focus(); }
  });

  document.addEventListener("keydown", function (e) {
    if (e.ctrlKey || e.metaKey || e.altKey || typing(e.target)) { return; }
    var open = document.querySelector("dialog.keys-dialog[open]");
    if (open && e.key !== "?") { return; }  // the dialog has the keyboard
    if (e.key === "j") { move(1); } else if (e.key === "k") { move(-1); }
    else if (e.key === "a") { approve(); } else if (e.key === "?") { help(); }
    else { return; }
    e.preventDefault();
  });
}());
